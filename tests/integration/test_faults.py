"""Faults injected on purpose into a real openlaked (test builds: the hook
at the I/O completions of the object engine and the KV disk tier,
src/base/fault.h, docs/testing.md), driven by OPENLAKE_FAULTS at start and
by POST /_openlake/debug/faults while it runs.

One drive whose writes fail for good: every PUT is acknowledged on the
write quorum and the heal queue puts the drive back. fsync failing on one
drive in the commit: that drive counts as failed and is healed. ENOSPC on
every drive: 507 XOpenLakeStorageFull and nothing stored. The KV disk tier
whose writes fail: values stay served from RAM while there, a miss after,
never wrong bytes; reads cut short: a miss, never wrong bytes. The
endpoint's answers, a bad spec at start (exit 2), and no endpoint without
debug endpoints.
"""
import os

import pytest

import faults
from test_kv import TOKEN, hermetic_openlake_env, kvd  # noqa: F401
from test_kv_disk import disk_args, put_written, values
from kvwire import KvClient, St
from test_s3 import AK, SK, client, error_of
from test_s3_heal import files_of, metrics, wait_metric

pytestmark = pytest.mark.skipif(not faults.build_has_faults(), reason=faults.SKIP_REASON)

MIB = 1 << 20


def drives_daemon(make_daemon, tmp_path, spec=None, n=4, debug=True):
    drives = [tmp_path / f"drive{i}" for i in range(n)]
    for dr in drives:
        dr.mkdir()
    env = {"OPENLAKE_ACCESS_KEY": AK, "OPENLAKE_SECRET_KEY": SK}
    if spec is not None:
        env[faults.ENV] = spec
    args = ["--mode", "s3", "--data-dirs", ",".join(map(str, drives))]
    if debug:
        args += ["--http.debug-endpoints", "true"]
    return make_daemon(args=args, env=env), drives


def store_metric(d, name):
    return metrics(d, "openlake_store_")["openlake_store_" + name]


def test_one_drives_writes_fail_puts_succeed_and_heal_repairs(make_daemon, tmp_path):
    d, drives = drives_daemon(make_daemon, tmp_path, "store:drive=1,op=write,err=EIO,persist")
    c = client(d)
    c.create_bucket(Bucket="eio")
    bodies = {f"k{n}": os.urandom(n) for n in (10, 300_000, 3 * MIB + 7)}
    for k, b in bodies.items():
        c.put_object(Bucket="eio", Key=k, Body=b)
        assert c.get_object(Bucket="eio", Key=k)["Body"].read() == b
    assert faults.injected(d) >= 3
    assert store_metric(d, "write_drive_failures_total") >= 3
    assert store_metric(d, "put_errors_total") == 0
    # the healer's own I/O has no hook: it rebuilds drive 1 while its writes still fail
    wait_metric(d, lambda m: m["openlake_heal_objects_healed_total"] >= 3)
    assert files_of(drives[1], "eio").keys() == files_of(drives[0], "eio").keys()
    assert faults.post(d, "")[0] == 200
    for k, b in bodies.items():
        assert c.get_object(Bucket="eio", Key=k)["Body"].read() == b


def test_fsync_failing_on_one_drive_in_the_commit(make_daemon, tmp_path):
    d, drives = drives_daemon(make_daemon, tmp_path)
    c = client(d)
    c.create_bucket(Bucket="fsy")
    failures = store_metric(d, "write_drive_failures_total")
    status, body = faults.post(d, "store:drive=2,op=fsync,err=EIO,persist")
    assert status == 200 and "drive=2,op=fsync" in body, body
    body = os.urandom(700_000)
    c.put_object(Bucket="fsy", Key="k", Body=body)
    assert store_metric(d, "write_drive_failures_total") == failures + 1
    assert faults.injected(d) >= 1
    faults.post(d, "")
    wait_metric(d, lambda m: m["openlake_heal_objects_healed_total"] >= 1)
    assert files_of(drives[2], "fsy").keys() == files_of(drives[0], "fsy").keys()
    assert c.get_object(Bucket="fsy", Key="k")["Body"].read() == body


def test_enospc_on_every_drive_is_storage_full(make_daemon, tmp_path):
    d, _ = drives_daemon(make_daemon, tmp_path, "store:op=write,err=ENOSPC,persist")
    c = client(d)
    c.create_bucket(Bucket="full")
    for size in (100, 2 * MIB):    # inline (its metadata) and with shard files
        code, status, _ = error_of(lambda: c.put_object(Bucket="full", Key="k",
                                                        Body=b"x" * size))
        assert (code, status) == ("XOpenLakeStorageFull", 507)
        assert error_of(lambda: c.head_object(Bucket="full", Key="k"))[1] == 404
    faults.post(d, "")
    c.put_object(Bucket="full", Key="k", Body=b"fits")
    assert c.get_object(Bucket="full", Key="k")["Body"].read() == b"fits"


def test_the_endpoint_and_the_variable(make_daemon, tmp_path):
    d, _ = drives_daemon(make_daemon, tmp_path, "store:drive=0,op=fsync,nth=3,persist")
    got = faults.get(d)
    assert got["rules"][0]["rule"] == "store:drive=0,op=fsync,nth=3,err=EIO,persist", got
    status, body = faults.post(d, "store:op=sync")
    assert status == 400 and 'bad field "op=sync"' in body, body
    assert faults.get(d)["rules"][0]["rule"].startswith("store:drive=0"), "a bad spec changes nothing"
    status, _ = faults.post(d, "kvdisk:op=read,err=short;store:p=0.5,seed=3")
    assert status == 200 and len(faults.get(d)["rules"]) == 2
    assert faults.post(d, "")[0] == 200 and faults.get(d)["rules"] == []
    d.stop()
    # a bad spec at start: exit 2 naming the variable
    d.env[faults.ENV] = "disk:op=read"
    d.start(wait=False)
    assert d.proc.wait(timeout=30) == 2
    d.stop(expect_rc=2)
    assert "OPENLAKE_FAULTS" in d.stderr() and "store:, kvdisk: or rma:" in d.stderr()
    # without debug endpoints there is no endpoint
    sub = tmp_path / "nodebug"
    sub.mkdir()
    d2, _ = drives_daemon(make_daemon, sub, debug=False)
    status, _ = faults.post(d2, "store:op=read")
    assert status == 404


def kv_client(d):
    return KvClient(d.kv_sock, TOKEN, ns=b"disk", value_size=MIB, shm=True)


def test_kv_disk_write_errors_keep_values_in_ram_and_serve_no_wrong_bytes(kvd):  # noqa: F811
    d = kvd(threads=1, capacity="0.0625",
            args=[*disk_args(0.25), "--http.debug-endpoints", "true"],
            env={faults.ENV: "kvdisk:op=write,err=EIO,persist"})
    c = kv_client(d)
    pairs = values(b"eio", 100)                   # 100 MiB through a 64 MiB slab
    for i in range(0, len(pairs), 10):
        assert c.put(pairs[i:i + 10]) == [St.OK] * 10
    keys = [k for k, _ in pairs]
    got = c.get(keys)
    assert all(g is None or g == v for g, (_, v) in zip(got, pairs))
    assert sum(g is not None for g in got) >= 32, "the newest are still in RAM"
    assert got[0] is None, "evicted from RAM, never written to disk: a miss"
    assert c.stats()["disk_entries"] == 0
    assert faults.injected(d, "kvdisk") >= 10
    # writes work again: values go to disk; then reads are cut short: a miss, never wrong
    faults.post(d, "")
    more = values(b"ok", 80)
    put_written(c, more)
    faults.post(d, "kvdisk:op=read,err=short,persist")
    got = c.get([k for k, _ in more[:20]])        # evicted from RAM: read from disk
    assert all(g is None or g == v for g, (_, v) in zip(got, more[:20]))
    assert sum(g is None for g in got) >= 10
    faults.post(d, "")
    got = c.get([k for k, _ in more])
    assert all(g is None or g == v for g, (_, v) in zip(got, more))
    c.close()
