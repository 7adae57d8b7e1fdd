"""Durability under crashes: rounds of concurrent PUTs (small, medium),
multipart uploads and DELETEs from several clients, each round ended by
`kill -9` at a random moment. After every restart each key holds exactly
what its last acknowledged operation left, or what the one operation in
flight at the kill would have left (never a mix, a torn body or a stale
older version), and the listing shows exactly the keys that can be read.
"""
import hashlib
import os
import random
import signal
import threading
import time

import botocore

from test_s3 import client, multi_drive

MiB = 1024 * 1024
ROUNDS = int(os.environ.get("OPENLAKE_CRASH_ROUNDS", "6"))
WORKERS, KEYS_PER_WORKER = 3, 6


def digest(b):
    return hashlib.sha256(b).hexdigest()


class Worker(threading.Thread):
    """Runs random operations on its own keys until stopped; per key it
    records the state the last acknowledged operation left and, at the end,
    the state the operation in flight would leave (if one was)."""

    def __init__(self, d, keys, state, rng):
        super().__init__(daemon=True)
        self.c = client(d)
        self.keys, self.state, self.rng = keys, state, rng
        self.inflight = {}          # key -> state it would leave
        self.stop = False
        self.acks = 0

    def op(self, key):
        r = self.rng.random()
        if r < 0.45:
            body = os.urandom(self.rng.randrange(0, 64 * 1024))
            self.inflight[key] = digest(body)
            self.c.put_object(Bucket="crash", Key=key, Body=body)
        elif r < 0.60:
            body = os.urandom(self.rng.randrange(64 * 1024, 3 * MiB // 2))
            self.inflight[key] = digest(body)
            self.c.put_object(Bucket="crash", Key=key, Body=body)
        elif r < 0.85:
            self.inflight[key] = None
            self.c.delete_object(Bucket="crash", Key=key)
        else:
            p1, p2 = os.urandom(5 * MiB), os.urandom(self.rng.randrange(1, 200 * 1024))
            self.inflight[key] = digest(p1 + p2)
            uid = self.c.create_multipart_upload(Bucket="crash", Key=key)["UploadId"]
            e1 = self.c.upload_part(Bucket="crash", Key=key, UploadId=uid, PartNumber=1,
                                    Body=p1)["ETag"]
            e2 = self.c.upload_part(Bucket="crash", Key=key, UploadId=uid, PartNumber=2,
                                    Body=p2)["ETag"]
            self.c.complete_multipart_upload(
                Bucket="crash", Key=key, UploadId=uid,
                MultipartUpload={"Parts": [{"PartNumber": 1, "ETag": e1},
                                           {"PartNumber": 2, "ETag": e2}]})
        self.state[key] = self.inflight.pop(key)
        self.acks += 1

    def run(self):
        try:
            while not self.stop:
                self.op(self.rng.choice(self.keys))
        except (botocore.exceptions.BotoCoreError, botocore.exceptions.ClientError):
            pass                    # the daemon died under us: inflight says what was open


def read_state(c, keys):
    out = {}
    for k in keys:
        try:
            out[k] = digest(c.get_object(Bucket="crash", Key=k)["Body"].read())
        except botocore.exceptions.ClientError as e:
            assert e.response["Error"]["Code"] == "NoSuchKey", e.response
            out[k] = None
    return out


def test_kill_9_during_concurrent_writes_many_rounds(make_daemon, tmp_path):
    d, _ = multi_drive(make_daemon, tmp_path)
    client(d).create_bucket(Bucket="crash")
    keys = [f"w{w}/key{i:02d}" for w in range(WORKERS) for i in range(KEYS_PER_WORKER)]
    state = {k: None for k in keys}
    rng = random.Random(int(os.environ.get("OPENLAKE_CRASH_SEED", "0")) or None)
    total_acks = 0
    for rnd in range(ROUNDS):
        workers = [Worker(d, keys[w * KEYS_PER_WORKER:(w + 1) * KEYS_PER_WORKER], state,
                          random.Random(rng.random())) for w in range(WORKERS)]
        for w in workers:
            w.start()
        time.sleep(rng.uniform(0.4, 2.0))
        d.signal(signal.SIGKILL)
        d.proc.wait()
        for w in workers:
            w.stop = True
            w.join(timeout=60)
            assert not w.is_alive()
            total_acks += w.acks
        d.stop(expect_rc=None)
        d.start()
        c = client(d)
        got = read_state(c, keys)
        inflight = {k: v for w in workers for k, v in w.inflight.items()}
        for k in keys:
            allowed = {state[k]} | ({inflight[k]} if k in inflight else set())
            assert got[k] in allowed, (rnd, k, got[k], allowed)
            state[k] = got[k]
        listed = set()
        for page in c.get_paginator("list_objects_v2").paginate(Bucket="crash"):
            listed |= {o["Key"] for o in page.get("Contents", [])}
        assert listed == {k for k in keys if got[k] is not None}, rnd
    assert total_acks > ROUNDS * 5     # the rounds did real work


def test_rebuilt_listing_needs_a_quorum_for_a_delete_marker(make_daemon, tmp_path):
    """A DELETE of a versioned key cut short after its marker reached one
    drive of four: GET still serves the object (a marker needs a read
    quorum), so the listing rebuilt after the crash must show the key."""
    d, drives = multi_drive(make_daemon, tmp_path)
    c = client(d)
    c.create_bucket(Bucket="vqb")
    c.put_bucket_versioning(Bucket="vqb", VersioningConfiguration={"Status": "Enabled"})
    c.put_object(Bucket="vqb", Key="k", Body=b"still here")
    d.stop()
    metas = [next((dr / ".openlake" / "buckets" / "vqb" / "objects").rglob("meta"))
             for dr in drives]
    saved = [m.read_bytes() for m in metas]
    d.start()
    client(d).delete_object(Bucket="vqb", Key="k")            # a marker on every drive
    d.signal(signal.SIGKILL)
    d.proc.wait()
    d.stop(expect_rc=None)
    for m, b in list(zip(metas, saved))[1:]:                   # undone on three drives
        m.write_bytes(b)
    clean = drives[0] / ".openlake" / "index" / "clean"
    if clean.exists():
        clean.unlink()
    d.start()
    c = client(d)
    assert c.get_object(Bucket="vqb", Key="k")["Body"].read() == b"still here"
    assert [o["Key"] for o in c.list_objects_v2(Bucket="vqb").get("Contents", [])] == ["k"]
