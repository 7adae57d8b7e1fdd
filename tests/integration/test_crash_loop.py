"""The crash-and-fault loop: rounds of a random workload on one openlaked
(S3 on four drives, the KV service with a disk tier and a small slab) under
random faults injected at the I/O completions (src/base/fault.h), each
round ended by kill -9 at a random moment, then a restart without faults
and the invariants:

  - the daemon restarts, every round;
  - every key reads back exactly the bytes of one generation a client may
    expect: its last acknowledged write or delete, or one whose request
    failed or was cut short since (its outcome is unknown to the client);
    bytes of no generation at all are a torn object, those of an older one
    an acknowledged write lost;
  - GETs during the round, under the faults, answer the same way or fail;
  - ListObjectsV2 (every page) lists exactly the keys HEAD finds;
  - KV values read back are the bytes put, checksum and all (a cache may
    miss, never answer wrong bytes), during the round and after it.

The workload, per round: three S3 clients on keys of their own (PUTs of
0 B to 1.5 MiB whose bytes derive from key and generation, multipart
uploads with Complete, DELETE, DeleteObjects batches, GETs), one
`openlake heal` walk, and one KV client putting values that overflow the
slab (so the disk tier writes behind) and reading them back. The faults
come from OPENLAKE_FAULTS at start or from POST /_openlake/debug/faults
(either, at random).

Bounded by time (OPENLAKE_CRASH_LOOP_SECONDS, default 90) and by rounds
(OPENLAKE_CRASH_LOOP_ROUNDS, default 40); seeded (OPENLAKE_CRASH_LOOP_SEED,
printed with the summary, repeats the same rounds, faults and workload
choices; thread timing still varies). Test builds only: it needs the fault
hook, so it runs once in `make test`, against build/asan.
"""
import hashlib
import os
import random
import signal
import subprocess
import tempfile
import threading
import time

import botocore
import pytest

import faults
from conftest import bin_path
from kvwire import KvClient, St
from test_kv import TOKEN, hermetic_openlake_env  # noqa: F401
from test_s3 import AK, SK, client

pytestmark = [pytest.mark.crashloop,
              pytest.mark.skipif(not faults.build_has_faults(), reason=faults.SKIP_REASON)]

MiB = 1 << 20
BUCKET = "crashloop"
WORKERS, KEYS_PER_WORKER = 3, 6
SECONDS = float(os.environ.get("OPENLAKE_CRASH_LOOP_SECONDS", "90"))
ROUNDS = int(os.environ.get("OPENLAKE_CRASH_LOOP_ROUNDS", "40"))

STORE_OPS = ("read", "write", "fsync", "open", "close", "rename", "unlink", "mkdir", "statx",
             "fallocate", "any")


def body(key, gen, size):
    """The bytes of generation gen of key: derived, so a torn or stale read shows."""
    return hashlib.shake_256(f"{key}#{gen}".encode()).digest(size)


def digest(b):
    return hashlib.sha256(b).hexdigest()


def random_spec(rng):
    rules = []
    for _ in range(rng.randint(1, 3)):
        if rng.random() < 0.75:
            mod, op = "store", rng.choice(STORE_OPS)
            drive = rng.choice(["any", "0", "1", "2", "3", "1", "2"])
        else:
            mod, op = "kvdisk", rng.choice(("read", "write", "any"))
            drive = rng.choice(["any", "0", "1"])
        err = rng.choice(("EIO", "EIO", "ENOSPC", "short") if op in ("read", "write", "any")
                         else ("EIO", "EIO", "ENOSPC"))
        when = (f"nth={rng.randint(1, 40)}" if rng.random() < 0.5 else
                f"p={rng.choice((0.01, 0.05, 0.2, 0.5))},seed={rng.randrange(1000)}")
        mode = "persist" if rng.random() < 0.4 else "once"
        rules.append(f"{mod}:drive={drive},op={op},err={err},{when},{mode}")
    return ";".join(rules)


class Keys:
    """What each S3 key may read as: the generations (None: absent) that a
    client may see, and the digest of every generation ever written."""

    def __init__(self, keys):
        self.allowed = {k: {None} for k in keys}
        self.digests = {k: {None: None} for k in keys}
        self.lock = threading.Lock()

    def wrote(self, key, gen, data):
        with self.lock:
            self.digests[key][gen] = digest(data)

    def acked(self, key, gen):
        with self.lock:
            self.allowed[key] = {gen}

    def doubt(self, key, gen):
        with self.lock:
            self.allowed[key].add(gen)

    def check(self, key, got, where):
        """got: the digest read (None: no such key). Returns the generation it is."""
        with self.lock:
            gens = [g for g, d in self.digests[key].items() if d == got]
            if not gens:
                raise AssertionError(f"{where}: {key} reads bytes of no generation written "
                                     f"(a torn or wrong object)")
            ok = [g for g in gens if g in self.allowed[key]]
            if not ok:
                raise AssertionError(f"{where}: {key} reads generation {gens[0]}, but the "
                                     f"client may only see {sorted(self.allowed[key], key=str)} "
                                     f"(an acknowledged write or delete was lost)")
            return ok[0]


class Worker(threading.Thread):
    """Random S3 operations on its own keys until stopped."""

    def __init__(self, d, keys, state, rng, gens):
        super().__init__(daemon=True)
        self.c = client(d, connect_timeout=5, read_timeout=30)
        self.keys, self.state, self.rng, self.gens = keys, state, rng, gens
        self.stop = False
        self.error = None
        self.ops = self.acks = self.failed = 0

    def gen(self, key):
        self.gens[key] += 1
        return self.gens[key]

    def put(self, key, size):
        g = self.gen(key)
        data = body(key, g, size)
        self.state.wrote(key, g, data)
        self.state.doubt(key, g)
        self.c.put_object(Bucket=BUCKET, Key=key, Body=data)
        self.state.acked(key, g)

    def multipart(self, key):
        g = self.gen(key)
        data = body(key, g, 5 * MiB + self.rng.randrange(1, 100_000))
        self.state.wrote(key, g, data)
        uid = self.c.create_multipart_upload(Bucket=BUCKET, Key=key)["UploadId"]
        e1 = self.c.upload_part(Bucket=BUCKET, Key=key, UploadId=uid, PartNumber=1,
                                Body=data[:5 * MiB])["ETag"]
        e2 = self.c.upload_part(Bucket=BUCKET, Key=key, UploadId=uid, PartNumber=2,
                                Body=data[5 * MiB:])["ETag"]
        self.state.doubt(key, g)            # from Complete on, it may take effect
        self.c.complete_multipart_upload(
            Bucket=BUCKET, Key=key, UploadId=uid,
            MultipartUpload={"Parts": [{"PartNumber": 1, "ETag": e1},
                                       {"PartNumber": 2, "ETag": e2}]})
        self.state.acked(key, g)

    def delete(self, key):
        self.state.doubt(key, None)
        self.c.delete_object(Bucket=BUCKET, Key=key)
        self.state.acked(key, None)

    def delete_objects(self):
        batch = self.rng.sample(self.keys, self.rng.randint(2, 4))
        for k in batch:
            self.state.doubt(k, None)
        r = self.c.delete_objects(Bucket=BUCKET,
                                  Delete={"Objects": [{"Key": k} for k in batch]})
        for o in r.get("Deleted", []):
            self.state.acked(o["Key"], None)

    def get(self, key):
        try:
            got = digest(self.c.get_object(Bucket=BUCKET, Key=key)["Body"].read())
        except botocore.exceptions.ClientError as e:
            if e.response["Error"]["Code"] != "NoSuchKey":
                return                          # failed under the faults: allowed
            got = None
        self.state.check(key, got, "a GET during the round")

    def op(self):
        key = self.rng.choice(self.keys)
        r = self.rng.random()
        if r < 0.30:
            self.put(key, self.rng.randrange(0, 64 * 1024))
        elif r < 0.45:
            self.put(key, self.rng.randrange(64 * 1024, 3 * MiB // 2))
        elif r < 0.50:
            self.put(key, 0)
        elif r < 0.60:
            self.delete(key)
        elif r < 0.72:
            self.delete_objects()
        elif r < 0.80:
            self.multipart(key)
        else:
            self.get(key)

    def run(self):
        while not self.stop:
            self.ops += 1
            try:
                self.op()
                self.acks += 1
            except (botocore.exceptions.BotoCoreError, botocore.exceptions.ClientError):
                self.failed += 1            # a fault's error, or the daemon is gone
                if self.stop:
                    break
                time.sleep(0.01)
            except AssertionError as e:
                self.error = e
                break


class KvWorker(threading.Thread):
    """Puts values through a small slab (the disk tier writes behind) and
    reads some back: exactly their bytes, or a miss."""

    def __init__(self, sock, rnd, rng, written):
        super().__init__(daemon=True)
        self.sock, self.rnd, self.rng, self.written = sock, rnd, rng, written
        self.stop = False
        self.error = None
        self.puts = 0

    def run(self):
        try:
            c = KvClient(self.sock, TOKEN, ns=b"loop", value_size=MiB, shm=True, timeout=10)
        except Exception:  # noqa: BLE001 - killed before it connected
            return
        n = 0
        try:
            while not self.stop:
                pairs = []
                for _ in range(4):
                    k = b"r%03d-%05d" % (self.rnd, n)
                    n += 1
                    pairs.append((k, kv_value(k, self.rng.choice((64, 256, 1024)) << 10)))
                sts = c.put(pairs)
                for (k, v), st in zip(pairs, sts):
                    if st == St.OK:
                        self.written[k] = len(v)
                        self.puts += 1
                old = self.rng.sample(sorted(self.written), min(4, len(self.written)))
                for k, g in zip(old, c.get(old)):
                    if g is not None and g != kv_value(k, self.written[k]):
                        self.error = AssertionError(f"KV {k!r}: wrong bytes during the round")
                        return
        except AssertionError as e:
            self.error = e
        except Exception:  # noqa: BLE001 - the daemon was killed under us
            pass
        finally:
            try:
                c.close()
            except Exception:  # noqa: BLE001
                pass


def kv_value(key, n):
    return hashlib.shake_128(key + b"/v").digest(n)


def heal_walk(d):
    try:
        subprocess.run([bin_path("openlake"), "heal", BUCKET, "--endpoint", d.url,
                        "--access-key", AK, "--secret-key", SK],
                       capture_output=True, text=True, timeout=30)
    except subprocess.TimeoutExpired:
        pass


def verify(d, state, keys, kv_sock, kv_written, rng, rnd, where):
    """The invariants, after a restart without faults."""
    c = client(d, connect_timeout=5, read_timeout=60)
    found = set()
    for k in keys:
        try:
            got = digest(c.get_object(Bucket=BUCKET, Key=k)["Body"].read())
        except botocore.exceptions.ClientError as e:
            assert e.response["Error"]["Code"] == "NoSuchKey", (where, k, e.response)
            got = None
        g = state.check(k, got, where)
        with state.lock:
            state.allowed[k] = {g}           # what the next round starts from
        try:
            c.head_object(Bucket=BUCKET, Key=k)
            found.add(k)
        except botocore.exceptions.ClientError as e:
            assert e.response["ResponseMetadata"]["HTTPStatusCode"] == 404, (where, k)
        assert (k in found) == (g is not None), f"{where}: {k}: HEAD and GET disagree"
    listed = set()
    for page in c.get_paginator("list_objects_v2").paginate(
            Bucket=BUCKET, PaginationConfig={"PageSize": 5}):
        listed |= {o["Key"] for o in page.get("Contents", [])}
    # KV: never wrong bytes (a miss is allowed)
    sample = sorted(kv_written)
    sample = [k for k in sample if k.startswith(b"r%03d" % rnd)] + \
        rng.sample(sample, min(24, len(sample)))
    if sample:
        with KvClient(kv_sock, TOKEN, ns=b"loop", value_size=MiB, shm=True) as kc:
            for i in range(0, len(sample), 16):
                part = sample[i:i + 16]
                for k, g in zip(part, kc.get(part)):
                    assert g is None or g == kv_value(k, kv_written[k]), \
                        f"{where}: KV {k!r} reads wrong bytes after the restart"
    assert listed == found, (f"{where}: listed but not found {sorted(listed - found)}, found "
                             f"but not listed {sorted(found - listed)}")


@pytest.mark.timeout(SECONDS + 240)
def test_crash_and_fault_loop(make_daemon, tmp_path, capsys):
    seed = int(os.environ.get("OPENLAKE_CRASH_LOOP_SEED", "0")) or random.randrange(1, 1 << 31)
    rng = random.Random(seed)
    drives = [tmp_path / f"drive{i}" for i in range(4)]
    for dr in drives:
        dr.mkdir()
    sock = os.path.join(tempfile.mkdtemp(prefix="olcl"), "kv.sock")
    d = make_daemon(args=["--data-dirs", ",".join(map(str, drives)), "--threads", "2",
                          "--kv-slab.capacity-gb", "0.0625", "--kv-disk.capacity-gb", "0.25",
                          "--kv-token", TOKEN, "--kv-socket", sock,
                          "--http.debug-endpoints", "true"],
                    env={"OPENLAKE_ACCESS_KEY": AK, "OPENLAKE_SECRET_KEY": SK})
    client(d).create_bucket(Bucket=BUCKET)
    keys = [f"w{w}/k{i:02d}" for w in range(WORKERS) for i in range(KEYS_PER_WORKER)]
    state, gens, kv_written = Keys(keys), {k: 0 for k in keys}, {}
    t0 = time.time()
    totals = {"rounds": 0, "store": 0, "kvdisk": 0, "ops": 0, "acks": 0, "failed": 0,
              "kv_puts": 0, "env": 0, "post": 0}
    log = []
    rnd = 0
    try:
        for rnd in range(ROUNDS):
            if time.time() - t0 > SECONDS:
                break
            where = f"seed {seed} round {rnd}"
            spec = random_spec(rng)
            if rng.random() < 0.5:          # the faults from the environment at start
                d.stop()
                d.env[faults.ENV] = spec
                d.start()
                totals["env"] += 1
            else:                           # or from the endpoint of the running daemon
                status, text = faults.post(d, spec)
                assert status == 200, (where, text)
                totals["post"] += 1
            wrng = random.Random(rng.random())
            workers = [Worker(d, keys[w * KEYS_PER_WORKER:(w + 1) * KEYS_PER_WORKER], state,
                              random.Random(wrng.random()), gens) for w in range(WORKERS)]
            kvw = KvWorker(sock, rnd, random.Random(wrng.random()), kv_written)
            healer = threading.Thread(target=heal_walk, args=(d,), daemon=True)
            for t in (*workers, kvw):
                t.start()
            run_for = rng.uniform(0.5, 2.5)     # then kill -9
            heal_at = rng.uniform(0, run_for)
            time.sleep(heal_at)
            healer.start()
            time.sleep(run_for - heal_at)
            try:
                inj = faults.get(d)["injected"]
            except OSError:
                inj = {"store": 0, "kvdisk": 0}
            d.signal(signal.SIGKILL)
            d.proc.wait()
            for t in (*workers, kvw):
                t.stop = True
            for t in (*workers, kvw):
                t.join(timeout=60)
                assert not t.is_alive(), f"{where}: a client hangs after the kill"
            healer.join(timeout=40)
            for w in workers:
                if w.error:
                    raise AssertionError(f"{where}: {w.error}")
            if kvw.error:
                raise AssertionError(f"{where}: {kvw.error}")
            d.stop(expect_rc=None)           # sanitizer reports and fired asserts fail here
            if os.path.exists(sock):
                os.unlink(sock)
            d.env.pop(faults.ENV, None)
            d.start()                        # the daemon restarts: wait_ready fails otherwise
            verify(d, state, keys, sock, kv_written, rng, rnd, where)
            totals["rounds"] += 1
            totals["store"] += inj["store"]
            totals["kvdisk"] += inj["kvdisk"]
            totals["ops"] += sum(w.ops for w in workers)
            totals["acks"] += sum(w.acks for w in workers)
            totals["failed"] += sum(w.failed for w in workers)
            totals["kv_puts"] += kvw.puts
            log.append(f"round {rnd}: {spec} | injected store {inj['store']} kvdisk "
                       f"{inj['kvdisk']} | ops {sum(w.ops for w in workers)} failed "
                       f"{sum(w.failed for w in workers)} kv puts {kvw.puts}")
    except AssertionError as e:
        raise AssertionError(f"crash loop (OPENLAKE_CRASH_LOOP_SEED={seed}) failed: {e}\n"
                             + "\n".join(log[-5:]) + "\n--- daemon stderr:\n" + d.stderr()[-4000:])
    summary = (f"crash loop: seed {seed}, {totals['rounds']} rounds in {time.time() - t0:.0f} s "
               f"(faults from the environment {totals['env']}, from the endpoint "
               f"{totals['post']}), faults injected: store {totals['store']}, kvdisk "
               f"{totals['kvdisk']}; S3 ops {totals['ops']} ({totals['failed']} failed), KV puts "
               f"{totals['kv_puts']}; kill -9 and restart each round")
    with capsys.disabled():
        print("\n" + "\n".join(log) + "\n" + summary)
    assert totals["rounds"] >= 3, summary
    assert totals["store"] > 0, "no store fault was ever injected: " + summary
