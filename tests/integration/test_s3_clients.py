"""More real S3 clients against a real daemon: s3fs (fsspec), the
filesystem layer of pandas, Dask and PyTorch data loaders (it lives in its
own venv, .venv-s3fs, made by `make test`'s deps step: its aiobotocore pins
an older botocore than .venv's boto3); and curl with presigned URLs.
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
