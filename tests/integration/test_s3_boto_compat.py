"""AWS behaviours boto3 relies on, each checked with the current boto3
(.venv) and with boto3 1.35 (.venv-boto135, made by `make test-deps` from
tests/requirements-boto135.txt: the last release before 1.36 changed the
default checksums), by clients/boto_compat.py against a real daemon:

- ListObjectsV2 with ContinuationToken='' echoes an empty ContinuationToken
  and lists from the start;
- ListObjects (v1) with encoding-type=url encodes keys, markers and common
  prefixes but not Prefix (boto3 decodes Prefix for v2 only);
- CreateBucket of a bucket one owns: 200 in us-east-1, 409
  BucketAlreadyOwnedByYou in other regions;
- ListBuckets' max-buckets, continuation-token, prefix and bucket-region;
- Signature Version 2: boto3's default presigned GET and PUT, the header
  form (signature_version='s3'), expiry, tampering; s3_sigv2 = false.
"""
import os
import subprocess
import sys

import pytest

from conftest import ROOT
from test_s3 import AK, SK, s3d  # noqa: F401

SCRIPT = os.path.join(os.path.dirname(__file__), "clients", "boto_compat.py")
PYTHONS = {"current": sys.executable,
           "boto135": os.path.join(ROOT, ".venv-boto135", "bin", "python")}


@pytest.fixture(params=sorted(PYTHONS))
def py(request):
    path = PYTHONS[request.param]
    if not os.path.exists(path):
        pytest.skip("no .venv-boto135: run `make test-deps` (scripts/deps.sh test)")
    return request.param, path


def run(py, d, check, region="us-east-1"):
    name, path = py
    r = subprocess.run([path, SCRIPT, d.url, AK, SK, region, check], capture_output=True,
                       text=True, timeout=240)
    out = r.stdout.strip().splitlines()
    assert r.returncode == 0 and out and out[-1].startswith("OK boto3 "), r.stdout + r.stderr
    if name == "boto135":
        assert out[-1].startswith("OK boto3 1.35."), out[-1]


def test_list_objects_v2_echoes_an_empty_continuation_token(s3d, py):
    run(py, s3d, "list_v2_empty_token")


def test_list_objects_v1_leaves_prefix_unencoded(s3d, py):
    run(py, s3d, "list_v1_prefix")


def test_create_bucket_one_owns_in_us_east_1_is_200(s3d, py):
    run(py, s3d, "create_bucket_again")


def daemon_with(make_daemon, *args):
    return make_daemon(args=["--mode", "s3", *args],
                       env={"OPENLAKE_ACCESS_KEY": AK, "OPENLAKE_SECRET_KEY": SK})


def test_create_bucket_one_owns_elsewhere_is_409(make_daemon, py):
    run(py, daemon_with(make_daemon, "--region", "eu-west-1"), "create_bucket_again",
        region="eu-west-1")


def test_list_buckets_parameters(s3d, py):
    run(py, s3d, "list_buckets_params")


def test_list_buckets_parameters_in_another_region(make_daemon, py):
    run(py, daemon_with(make_daemon, "--region", "eu-west-1"), "list_buckets_params",
        region="eu-west-1")


def test_sigv2_presigned_urls_and_headers(s3d, py):
    run(py, s3d, "sigv2")
    # counted by signature version
    import urllib.request
    with urllib.request.urlopen(s3d.url + "/_openlake/metrics", timeout=10) as r:
        text = r.read().decode()
    counts = {line.split()[0]: int(line.split()[1]) for line in text.splitlines()
              if line.startswith("openlake_s3_auth_sig")}
    assert counts["openlake_s3_auth_sigv2_total"] >= 15, counts
    assert counts["openlake_s3_auth_sigv4_total"] >= 1, counts


def test_sigv2_turned_off(make_daemon, py):
    run(py, daemon_with(make_daemon, "--s3-sigv2", "false"), "sigv2_off")
