"""More real S3 clients against a real daemon: s3fs (fsspec), the
filesystem layer of pandas, Dask and PyTorch data loaders (it lives in its
own venv, .venv-s3fs, made by `make test`'s deps step: its aiobotocore pins
an older botocore than .venv's boto3); curl with presigned URLs; and s3cmd
(.venv-s3cmd) with SigV4 and SigV2.
"""
import os
import subprocess

import pytest

from conftest import ROOT
from test_s3 import AK, SK, s3d  # noqa: F401

S3FS_PY = os.path.join(ROOT, ".venv-s3fs", "bin", "python")


@pytest.mark.skipif(not os.path.exists(S3FS_PY),
                    reason="no .venv-s3fs: run `make test-deps` (scripts/deps.sh test)")
def test_s3fs_session(s3d):
    script = os.path.join(os.path.dirname(__file__), "clients", "s3fs_session.py")
    r = subprocess.run([S3FS_PY, script, s3d.url, AK, SK], capture_output=True, text=True,
                       timeout=300)
    assert r.returncode == 0 and r.stdout.strip().endswith("OK"), r.stdout + r.stderr


def test_curl_with_presigned_urls(s3d, tmp_path):
    """curl, knowing nothing of S3, moves an object in and out with
    presigned URLs; a tampered URL gets the S3 error document."""
    import shutil
    import boto3
    from botocore.config import Config
    from test_s3 import client
    curl = shutil.which("curl")
    assert curl, "curl is installed by scripts/deps.sh test"
    c = client(s3d)
    c.create_bucket(Bucket="curlb")
    signer = boto3.client("s3", endpoint_url=s3d.url, aws_access_key_id=AK,
                          aws_secret_access_key=SK, region_name="us-east-1",
                          config=Config(signature_version="s3v4"))
    body = os.urandom(3 * 1024 * 1024 + 5)
    src = tmp_path / "up.bin"
    src.write_bytes(body)
    put = signer.generate_presigned_url("put_object", Params={"Bucket": "curlb", "Key": "a b/c"},
                                        ExpiresIn=300)
    r = subprocess.run([curl, "-sS", "-f", "-T", str(src), put], capture_output=True, timeout=60)
    assert r.returncode == 0, r.stderr
    get = signer.generate_presigned_url("get_object", Params={"Bucket": "curlb", "Key": "a b/c"},
                                        ExpiresIn=300)
    dst = tmp_path / "down.bin"
    r = subprocess.run([curl, "-sS", "-f", "-o", str(dst), get], capture_output=True, timeout=60)
    assert r.returncode == 0 and dst.read_bytes() == body, r.stderr
    r = subprocess.run([curl, "-sS", "-r", "0-9", get], capture_output=True, timeout=60)
    assert r.stdout == body[:10]
    bad = get.replace("curlb/a%20b/c", "curlb/a%20b/d")
    r = subprocess.run([curl, "-sS", "-w", "%{http_code}", bad], capture_output=True, timeout=60)
    assert r.stdout.endswith(b"403") and b"<Code>SignatureDoesNotMatch</Code>" in r.stdout


S3CMD_PY = os.path.join(ROOT, ".venv-s3cmd", "bin", "python")


@pytest.mark.skipif(not os.path.exists(S3CMD_PY),
                    reason="no .venv-s3cmd: run `make test-deps` (scripts/deps.sh test)")
@pytest.mark.parametrize("sig", ["default", "v2"])
def test_s3cmd(s3d, tmp_path, sig):
    """s3cmd (.venv-s3cmd) with its default signature (SigV4 since 2.0) and
    with --signature-v2: buckets, put (one request and multipart), ls,
    get, info, signurl (always SigV2), del, rb."""
    import hashlib
    import urllib.request
    host = s3d.url.split("//", 1)[1]
    cfg = tmp_path / "s3cfg"
    cfg.write_text(f"[default]\naccess_key = {AK}\nsecret_key = {SK}\nhost_base = {host}\n"
                   f"host_bucket = {host}\nuse_https = False\nbucket_location = us-east-1\n")
    exe = os.path.join(ROOT, ".venv-s3cmd", "bin", "s3cmd")
    extra = ["--signature-v2"] if sig == "v2" else []

    def s3cmd(*args):
        r = subprocess.run([S3CMD_PY, exe, "-c", str(cfg), *extra, *args], capture_output=True,
                           text=True, timeout=120)
        assert r.returncode == 0, f"s3cmd {args}: {r.stdout}{r.stderr}"
        return r.stdout

    small = tmp_path / "small.txt"
    small.write_bytes(b"hello from s3cmd\n")
    big = tmp_path / "big.bin"
    big.write_bytes(os.urandom(11 * 1024 * 1024 + 3))
    b = f"s3://cmd-{sig}"
    s3cmd("mb", b)
    assert b in s3cmd("ls")
    s3cmd("put", str(small), f"{b}/dir one/small.txt")
    out = s3cmd("put", "--progress", "--multipart-chunk-size-mb=5", str(big), f"{b}/big.bin")
    assert "part 3 of 3" in out, out
    listing = s3cmd("ls", "-r", b)
    assert f"{b}/dir one/small.txt" in listing and f"{b}/big.bin" in listing, listing
    assert "DIR" in s3cmd("ls", f"{b}/")
    got = tmp_path / "got.bin"
    s3cmd("get", "--force", f"{b}/big.bin", str(got))
    assert hashlib.md5(got.read_bytes()).digest() == hashlib.md5(big.read_bytes()).digest()
    assert "File size: 17" in s3cmd("info", f"{b}/dir one/small.txt")
    url = s3cmd("signurl", f"{b}/dir one/small.txt", "+300").strip().splitlines()[-1]
    assert "AWSAccessKeyId=" in url and "Signature=" in url, url
    with urllib.request.urlopen(url, timeout=30) as r:
        assert r.read() == small.read_bytes()
    s3cmd("del", f"{b}/dir one/small.txt", f"{b}/big.bin")
    assert "small.txt" not in s3cmd("ls", "-r", b)
    s3cmd("rb", b)
    assert b not in s3cmd("ls")
