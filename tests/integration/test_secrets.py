"""Secrets given as files (docs/configuration.md#secrets): the S3 secret key
and the KV token read from --secret-key-file / --kv-token-file (or their
OPENLAKE_*_FILE variables) never show in /proc/PID/cmdline or on stderr,
and work: SigV4-signed S3 requests with that secret, a KV session with that
token. A secret given as a flag still works, with a warning naming the flag
and the file form; a bad secret file stops the start with exit 2.
"""
import os
import subprocess

import boto3
import pytest
from botocore.config import Config

import conftest
import kvwire
from kvwire import KvClient
from test_kv import hermetic_openlake_env  # noqa: F401

AK = "OLSECRETSACCESSKEY01"
SK = "olSecretsTestKey/0123456789abcdefghijklm"
TOKEN = "kv-token-from-a-file-0123456789"


def secret(tmp_path, name, text, mode=0o600):
    p = tmp_path / name
    p.write_text(text + "\n")
    p.chmod(mode)
    return p


def s3(d, sk=SK):
    return boto3.client("s3", endpoint_url=d.url, aws_access_key_id=AK, aws_secret_access_key=sk,
                        region_name="us-east-1", config=Config(retries={"max_attempts": 1}))


def cmdline(d):
    with open(f"/proc/{d.pid()}/cmdline", "rb") as f:
        return f.read()


def kv_session_works(d, token):
    with KvClient(("127.0.0.1", d.kv_port), token, ns=b"secrets") as c:
        return c.stats()["sessions"] >= 1


def test_secrets_from_files_stay_off_the_command_line_and_work(make_daemon, tmp_path):
    sk = secret(tmp_path, "s3.secret", SK)
    tok = secret(tmp_path, "kv.token", TOKEN)
    d = make_daemon(args=["--access-key", AK, "--secret-key-file", str(sk),
                          "--kv-token-file", str(tok)], threads=2)
    argv = cmdline(d)
    assert b"--secret-key-file\0" + str(sk).encode() in argv
    assert SK.encode() not in argv and TOKEN.encode() not in argv
    c = s3(d)
    c.create_bucket(Bucket="secrets")
    c.put_object(Bucket="secrets", Key="k", Body=b"signed with a secret from a file")
    assert c.get_object(Bucket="secrets", Key="k")["Body"].read() == \
        b"signed with a secret from a file"
    with pytest.raises(c.exceptions.ClientError):
        s3(d, sk="not-the-secret-0000").list_buckets()
    assert kv_session_works(d, TOKEN)
    with pytest.raises(kvwire.KvError):
        kv_session_works(d, "not-the-token")
    assert not (d.data / "kv.token").exists(), "a configured token is not written"
    err = d.stderr()
    assert "WARN" not in err, err
    assert SK not in err and TOKEN not in err
    out = d.proc.stdout.readline() + d.proc.stdout.readline()
    assert "serving" in out and SK not in out and TOKEN not in out


def test_secret_files_from_the_environment(make_daemon, tmp_path):
    sk = secret(tmp_path, "s3.secret", SK)
    tok = secret(tmp_path, "kv.token", TOKEN)
    d = make_daemon(env={"OPENLAKE_ACCESS_KEY": AK, "OPENLAKE_SECRET_KEY_FILE": str(sk),
                         "OPENLAKE_KV_TOKEN_FILE": str(tok)})
    assert SK.encode() not in cmdline(d) and TOKEN.encode() not in cmdline(d)
    assert s3(d).list_buckets()["Buckets"] == []
    assert kv_session_works(d, TOKEN)
    assert "WARN" not in d.stderr(), d.stderr()


def test_a_secret_as_a_flag_works_with_a_warning(make_daemon, tmp_path):
    d = make_daemon(args=["--kv-token", TOKEN, "--access-key", AK, "--secret-key", SK])
    assert kv_session_works(d, TOKEN)
    assert s3(d).list_buckets()["Buckets"] == []
    err = d.stderr()
    assert ("WARN  --kv-token on the command line is readable by any local user in "
            "/proc/PID/cmdline; use --kv-token-file FILE") in err, err
    assert "WARN  --secret-key on the command line is readable" in err, err
    assert "--secret-key-file FILE" in err
    assert TOKEN not in err and SK not in err


def test_a_secret_file_others_can_read_is_used_with_a_warning(make_daemon, tmp_path):
    tok = secret(tmp_path, "kv.token", TOKEN, mode=0o644)
    d = make_daemon(args=["--kv-token-file", str(tok)])
    assert kv_session_works(d, TOKEN)
    assert f"--kv-token-file: {tok} is mode 0644: group or others may read it" in d.stderr()


@pytest.mark.parametrize("case", ["missing", "empty", "both", "too-long"])
def test_a_bad_secret_file_stops_the_start(make_daemon, tmp_path, case):
    tok = tmp_path / "kv.token"
    if case == "empty":
        tok.write_text("\n")
    elif case == "too-long":
        tok.write_text("x" * 129 + "\n")
    elif case == "both":
        secret(tmp_path, "kv.token", TOKEN)
    args = ["--kv-token-file", str(tok)] + (["--kv-token", TOKEN] if case == "both" else [])
    d = make_daemon(args=args, start=False)
    d.start(wait=False)
    assert d.proc.wait(30) == 2
    want = {"missing": f"{tok}: cannot open: No such file or directory",
            "empty": f"{tok}: is empty",
            "too-long": f"{tok}: longer than 128 bytes",
            "both": "--kv-token-file: given together with command line: --kv-token"}[case]
    assert want in d.stderr(), d.stderr()
    assert TOKEN not in d.stderr()
    d.stop(expect_rc=2)


def test_openlake_heal_takes_the_secret_from_a_file(make_daemon, tmp_path):
    sk = secret(tmp_path, "s3.secret", SK)
    d = make_daemon(args=["--access-key", AK, "--secret-key-file", str(sk)])
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("OPENLAKE_", "AWS_"))}

    def heal(*args, **extra):
        return subprocess.run([conftest.bin_path("openlake"), "heal", "--endpoint", d.url, *args],
                              env={**env, **extra}, capture_output=True, text=True, timeout=120)
    r = heal(OPENLAKE_ACCESS_KEY=AK, OPENLAKE_SECRET_KEY_FILE=str(sk))
    assert r.returncode == 0 and "warning" not in r.stderr, r.stderr
    r = heal("--access-key", AK, "--secret-key-file", str(sk))
    assert r.returncode == 0 and "warning" not in r.stderr, r.stderr
    r = heal("--access-key", AK, "--secret-key", SK)
    assert r.returncode == 0, r.stderr
    assert "warning: --secret-key on the command line is readable by any local user" in r.stderr
    assert SK not in r.stderr + r.stdout
    r = heal("--access-key", AK, "--secret-key-file", str(tmp_path / "none"))
    assert r.returncode == 2 and "--secret-key-file" in r.stderr and "cannot open" in r.stderr
