"""The data frameworks the object store is for, against a real daemon:
Apache Spark through Hadoop's S3A connector, and Apache Flink through its
S3 file system (file sink and checkpoints). Each runs in its own venv made
by `make test`'s deps step (.venv-spark: pyspark; .venv-flink:
apache-flink), with the Java archives scripts/deps.sh fetches from Maven
Central into build/jars (tests/jars/pom.xml): hadoop-aws with its AWS SDK
bundle and spark-hadoop-cloud (the S3A committers) for Spark,
flink-s3-fs-hadoop for Flink. The sessions themselves are
tests/integration/clients/spark_s3a.py and flink_s3.py; here what they
left in the bucket is checked with boto3.
"""
import glob
import hashlib
import os
import subprocess

import pytest

from conftest import ROOT
from test_s3 import AK, SK, client, s3d  # noqa: F401  (s3d is a fixture)

MiB = 1024 * 1024
CLIENTS = os.path.join(os.path.dirname(__file__), "clients")
SPARK_PY = os.path.join(ROOT, ".venv-spark", "bin", "python")
FLINK_PY = os.path.join(ROOT, ".venv-flink", "bin", "python")
SPARK_JARS = os.path.join(ROOT, "build", "jars", "spark")
FLINK_JARS = os.path.join(ROOT, "build", "jars", "flink")
NEED = "run `make test-deps` (scripts/deps.sh test): it makes the venv and fetches the jars"


def _run(py, script, args, env=None, timeout=600):
    e = dict(os.environ, **(env or {}))
    r = subprocess.run([py, os.path.join(CLIENTS, script), *args], capture_output=True,
                       text=True, timeout=timeout, env=e)
    tail = (r.stdout[-4000:] + "\n" + r.stderr[-8000:])
    assert r.returncode == 0 and r.stdout.strip().endswith("OK"), tail


def _no_uploads_left(c, bucket):
    assert "Uploads" not in c.list_multipart_uploads(Bucket=bucket)


def _keys(c, bucket):
    return [o["Key"] for p in c.get_paginator("list_objects_v2").paginate(Bucket=bucket)
            for o in p.get("Contents", [])]


@pytest.mark.skipif(not (os.path.exists(SPARK_PY) and glob.glob(SPARK_JARS + "/hadoop-aws-*.jar")),
                    reason="no .venv-spark or build/jars/spark: " + NEED)
def test_spark_s3a_session(s3d):
    c = client(s3d)
    c.create_bucket(Bucket="spark")
    _run(SPARK_PY, "spark_s3a.py", [s3d.url, AK, SK, "spark", SPARK_JARS])
    # The magic committer's multipart uploads are all completed, nothing of
    # its __magic staging is left, and the partitions are there.
    _no_uploads_left(c, "spark")
    keys = _keys(c, "spark")
    assert not [k for k in keys if "__magic" in k or "_temporary" in k], keys
    magic = {k.split("/")[1] for k in keys if k.startswith("magic/k=")}
    assert magic == {f"k={i}" for i in range(7)}, magic
    # The 12 MiB stream arrived whole, as a 3-part upload.
    blob = hashlib.shake_256(b"openlake-spark").digest(12 * MiB + 333)
    h = c.head_object(Bucket="spark", Key="raw/big.bin")
    assert h["ContentLength"] == len(blob) and h["ETag"].endswith('-3"')
    assert c.get_object(Bucket="spark", Key="raw/big.bin")["Body"].read() == blob
    assert not [k for k in keys if k.startswith(("many/", "moved/"))]


@pytest.mark.skipif(not (os.path.exists(FLINK_PY) and glob.glob(FLINK_JARS + "/flink-s3-fs-*.jar")),
                    reason="no .venv-flink or build/jars/flink: " + NEED)
@pytest.mark.parametrize("fail", [False, True], ids=["straight", "fails-once-and-recovers"])
def test_flink_file_sink_and_checkpoints(s3d, tmp_path, fail):
    c = client(s3d)
    c.create_bucket(Bucket="flink")
    rows = 3000
    jar = glob.glob(FLINK_JARS + "/flink-s3-fs-*.jar")[0]
    marker = [str(tmp_path / "failed")] if fail else []
    _run(FLINK_PY, "flink_s3.py", [s3d.url, AK, SK, "flink", str(rows), *marker],
         env={"HADOOP_CLASSPATH": jar})
    # Every row exactly once in the committed part files (each a multipart
    # upload kept open across the checkpoints), no upload left open, the
    # checkpoints' data there. A straight run leaves none of the tails the
    # sink stored at checkpoints; after a recovery Flink keeps the ones it
    # resumed from, on purpose (FLINK-13941: deleting them could lose data
    # on a second restore), so there they may stay.
    _no_uploads_left(c, "flink")
    keys = _keys(c, "flink")
    parts = [k for k in keys if k.startswith("out/") and k.rsplit("/", 1)[1].startswith("part-")]
    assert len(parts) >= 2, keys
    tails = [k for k in keys if "_tmp_" in k or "inprogress" in k]
    assert not tails or fail, tails
    ids = []
    for k in parts:
        body = c.get_object(Bucket="flink", Key=k)["Body"].read().decode()
        for line in body.splitlines():
            assert line.startswith("+I[") and line.endswith("]"), line
            ids.append(int(line[3:].split(",")[0]))
    assert sorted(ids) == list(range(1, rows + 1))
    assert [k for k in keys if k.startswith("ckpt/")], keys
