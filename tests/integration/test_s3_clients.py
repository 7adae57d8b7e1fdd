"""More real S3 clients against a real daemon: s3fs (fsspec), the
filesystem layer of pandas, Dask and PyTorch data loaders. It lives in
its own venv (.venv-s3fs, made by `make test`'s deps step): its
aiobotocore pins an older botocore than .venv's boto3.
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
