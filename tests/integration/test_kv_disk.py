"""Black-box tests of the KV disk tier ([kv_disk], docs/kv-disk.md): values
written behind to a local drive, read back into RAM on a hit, found again
after a restart (clean or kill -9), never served when their bytes on disk
are damaged, and evicted by policy when the tier is full.

Real openlaked processes, real files; the strict wire client of kvwire.py
(no daemon code). Slabs are tiny (8-64 MiB) so that RAM overflows fast and
the values really come from the drive.
"""
import os
import signal
import struct
import threading
import time

import pytest

import kvwire
from kvwire import KvClient, KvConn, Op, St
from test_kv import TOKEN, blob, healthy, hermetic_openlake_env, kvd, poll, session  # noqa: F401

MIB = 1 << 20
HDR = 256             # one .idx header per slot id, after a 4 KiB superblock
SB = 4096


def disk_args(capacity_gb, queue_depth=None, dirs=None):
    a = ["--kv-disk.capacity-gb", str(capacity_gb)]
    if queue_depth:
        a += ["--kv-disk.queue-depth", str(queue_depth)]
    if dirs:
        a += ["--kv-disk.dirs", ",".join(str(x) for x in dirs)]
    return a


def client(d, value_size=MIB, ns=b"disk", shm=True):
    return KvClient(d.kv_sock, TOKEN, ns=ns, value_size=value_size, shm=shm)


def put_written(c, pairs, batch=8, timeout=30):
    """Puts in batches and waits, after each, until the disk tier holds every
    entry put so far (write-behind is asynchronous; a client that outruns the
    drive loses disk copies, which is allowed, so the tests pace themselves)."""
    base = c.stats()["disk_entries"]
    for i in range(0, len(pairs), batch):
        part = pairs[i:i + batch]
        assert c.put(part) == [St.OK] * len(part)
        want = base + i + len(part)
        assert poll(lambda: c.stats()["disk_entries"] >= want, timeout), c.stats()


def values(prefix, n, size=MIB):
    return [(b"%s-%04d" % (prefix, i), blob(b"%s-%04d" % (prefix, i), n=size)) for i in range(n)]


def restart(d, kill=False):
    if kill:
        d.proc.send_signal(signal.SIGKILL)
        d.proc.wait()
        d.stop(expect_rc=None)
        # The killed daemon leaves its socket file; wait_kv waits for the new one.
        if os.path.exists(d.kv_sock):
            os.unlink(d.kv_sock)
    else:
        d.stop()
    d.start(wait=False)
    from test_kv import wait_kv
    return wait_kv(d)


# ---- write-behind, promotion -----------------------------------------------------------------


def test_values_evicted_from_ram_are_read_back_from_disk(kvd):
    d = kvd(threads=2, capacity="0.0625", args=disk_args(0.5))
    c = client(d)
    pairs = values(b"blk", 160)                  # 160 MiB through a 64 MiB slab
    put_written(c, pairs)
    st = c.stats()
    assert st["evictions"] > 0 and st["entries"] <= 64, st
    assert st["disk_entries"] == 160 and st["disk_bytes"] == 160 * MIB, st
    keys = [k for k, _ in pairs]
    look = c.lookup(keys)
    assert look.leading == 160, "every key is on disk, so present"
    # The oldest values left RAM long ago: ACQUIRE brings them back first.
    got = c.get(keys[:48])
    assert got == [v for _, v in pairs[:48]]
    assert c.stats()["pins"] == 0
    # Reserve of a disk-only key: EXISTS, nobody writes it twice.
    assert c.conns[c.shard_of(keys[0])].reserve([keys[0]])[0].status in (St.EXISTS,)
    c.close()
    healthy(d)


def test_tcp_get_reads_disk_only_keys(kvd):
    d = kvd(threads=1, capacity="0.0625", args=disk_args(0.25))
    c = client(d)
    pairs = values(b"tcp", 96)
    put_written(c, pairs)
    t = session(d, unix=False, ns=b"disk", value_size=MIB)
    st, got = t.request(Op.GET, [k for k, _ in pairs[:12]])
    assert st == St.OK
    assert [g.status for g in got] == [St.OK] * 12
    assert [g.value for g in got] == [v for _, v in pairs[:12]]
    t.close()
    c.close()


def test_many_readers_of_one_disk_only_key(kvd):
    d = kvd(threads=1, capacity="0.0625", args=disk_args(0.25))
    c = client(d)
    pairs = values(b"hot", 80)
    put_written(c, pairs)
    key, val = pairs[0]
    errors = []

    def reader():
        try:
            r = client(d)
            for _ in range(5):
                if r.get([key]) != [val]:
                    errors.append("wrong value")
            r.close()
        except Exception as e:  # noqa: BLE001 - reported below
            errors.append(repr(e))

    threads = [threading.Thread(target=reader) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert not errors, errors
    assert c.stats()["pins"] == 0
    c.close()


# ---- persistence ----------------------------------------------------------------------------


@pytest.mark.parametrize("kill", [False, True], ids=["sigterm", "kill-9"])
def test_restart_serves_the_keys_it_had_on_disk(kvd, kill):
    d = kvd(threads=2, capacity="0.0625", args=disk_args(0.5))
    c = client(d)
    pairs = values(b"keep", 48, size=256 << 10) + values(b"big", 24)
    put_written(c, pairs)
    c.close()
    restart(d, kill=kill)
    assert "entries found" in d.stderr()
    c = client(d)
    st = c.stats()
    assert st["entries"] == 0, "RAM starts empty"
    assert st["disk_entries"] == len(pairs), st
    keys = [k for k, _ in pairs]
    assert c.lookup(keys).leading == len(keys)
    assert c.get(keys) == [v for _, v in pairs]
    # New writes after the restart go to disk too, and old keys still refuse a second write.
    assert c.put([(keys[0], b"x")]) == [St.EXISTS]
    put_written(c, values(b"after", 8))
    c.close()


def test_ready_only_once_the_disk_tier_has_recovered(kvd):
    """/_openlake/health/ready says ready only when the disk tier is whole
    again: at its first 200 after a restart, a HELLO on every shard is
    served at once (no BUSY) and STATS counts every entry on disk."""
    d = kvd(threads=2, capacity="0.0625", args=disk_args(0.5))
    c = client(d)
    pairs = values(b"rdy", 40, size=256 << 10)
    put_written(c, pairs)
    c.close()
    d.stop()
    d.start(wait=False)
    deadline = time.time() + 60
    while not d.is_ready():
        assert d.proc.poll() is None, d.stderr()
        assert time.time() < deadline, "not ready: " + d.stderr()
        time.sleep(0.005)
    conns = [session(d, unix=False, ns=b"disk", value_size=MIB, shard=s) for s in (0, 1)]
    assert sum(s.stats()["disk_entries"] for s in conns) == len(pairs)
    for s in conns:
        s.close()
    assert "40 entries found" in d.stderr()


def test_a_sigterm_restart_keeps_values_not_yet_written(kvd):
    """Shutdown finishes the write-behind queue before exiting."""
    d = kvd(threads=1, capacity="0.125", args=disk_args(0.25, queue_depth=1))
    c = client(d)
    pairs = values(b"late", 40)
    assert c.put(pairs) == [St.OK] * 40          # no waiting: most are still queued
    c.close()
    restart(d)
    c = client(d)
    assert c.stats()["disk_entries"] == 40
    assert c.get([k for k, _ in pairs]) == [v for _, v in pairs]
    c.close()


def test_changing_threads_starts_the_tier_empty(kvd, make_daemon):
    d = kvd(threads=1, capacity="0.0625", args=disk_args(0.25))
    c = client(d)
    put_written(c, values(b"t", 8))
    c.close()
    d.stop()
    d.args[d.args.index("--threads") + 1] = "2"
    d.start(wait=False)
    from test_kv import wait_kv
    wait_kv(d)
    assert "another layout" in d.stderr()
    c = client(d)
    assert c.stats()["disk_entries"] == 0
    assert c.lookup([b"t-0000"]).leading == 0
    c.close()


# ---- damage ---------------------------------------------------------------------------------


def idx_headers(path):
    """(slot id, header bytes) of every header with the disk magic."""
    out = []
    with open(path, "rb") as f:
        f.seek(SB)
        raw = f.read()
    for i in range(0, len(raw) - HDR + 1, HDR):
        if raw[i:i + 4] == b"OLKD":
            out.append((i // HDR, raw[i:i + HDR]))
    return out


def slot_offset(slot, slot_size):
    return (slot // 128) * (2 * MIB) + (slot % 128) * slot_size


def test_damaged_bytes_on_disk_are_a_miss_never_served(kvd):
    d = kvd(threads=1, capacity="0.0625", args=disk_args(0.25))
    c = client(d)
    pairs = values(b"dmg", 12)
    put_written(c, pairs)
    c.close()
    d.stop()
    ddir = d.data / "kv-disk"
    hdrs = idx_headers(ddir / "shard-0.idx")
    assert len(hdrs) == 12
    by_key = {}
    for slot, h in hdrs:
        key_len = struct.unpack_from("<H", h, 6)[0]
        slot_size = struct.unpack_from("<I", h, 60)[0]
        by_key[h[64:64 + key_len]] = (slot, slot_size)
    # 1. flip one byte in the middle of a value
    slot, ss = by_key[b"dmg-0003"]
    with open(ddir / "shard-0.dat", "r+b") as f:
        f.seek(slot_offset(slot, ss) + 500_000)
        b = f.read(1)
        f.seek(-1, os.SEEK_CUR)
        f.write(bytes([b[0] ^ 0x40]))
    # 2. flip a byte of another entry's header: it does not load at all
    slot, _ = by_key[b"dmg-0007"]
    with open(ddir / "shard-0.idx", "r+b") as f:
        f.seek(SB + slot * HDR + 20)
        b = f.read(1)
        f.seek(-1, os.SEEK_CUR)
        f.write(bytes([b[0] ^ 0x01]))
    d.start(wait=False)
    from test_kv import wait_kv
    wait_kv(d)
    c = client(d)
    keys = [k for k, _ in pairs]
    look = c.lookup(keys)
    assert not look.present[7], "a bad header is not indexed"
    assert look.present[3], "the value's damage is only seen when read"
    got = c.get(keys)
    assert got[3] is None and got[7] is None, "damaged entries are misses"
    assert [g for i, g in enumerate(got) if i not in (3, 7)] == \
        [v for i, (_, v) in enumerate(pairs) if i not in (3, 7)]
    look = c.lookup(keys)
    assert not look.present[3], "a value that failed its checksum is dropped"
    assert c.stats()["disk_entries"] == 10
    assert "failed its checks; entry dropped" in d.stderr(), "the operator is told"
    c.close()
    healthy(d)


# ---- full tier ------------------------------------------------------------------------------


def test_a_full_tier_evicts_by_policy_and_keeps_serving(kvd):
    # 32 MiB of disk, 8 MiB of RAM, 96 MiB of values.
    d = kvd(threads=1, capacity="0.0078125", args=disk_args(0.03125))
    c = client(d)
    pairs = values(b"full", 96)
    hot = pairs[0]
    for i in range(0, 96, 4):
        part = pairs[i:i + 4]
        assert c.put(part) == [St.OK] * 4
        poll(lambda: c.stats()["disk_entries"] >= min(32, i + 4), 10)
        assert c.get([hot[0]]) == [hot[1]], f"hot key lost after {i + 4} puts"
    st = c.stats()
    assert 0 < st["disk_entries"] <= 32 and st["disk_bytes"] <= 32 * MIB, st
    keys = [k for k, _ in pairs]
    look = c.lookup(keys)
    assert look.present[0], "a key read all along survives (eviction by policy, not FIFO)"
    assert all(look.present[-8:]), "the newest are kept"
    assert sum(look.present) < 96
    got = c.get(keys)
    for (k, v), g in zip(pairs, got):
        assert g is None or g == v
    c.close()
    healthy(d)


def test_delete_and_reset_reach_the_disk_and_survive_restart(kvd):
    d = kvd(threads=2, capacity="0.0625", args=disk_args(0.5))
    a = client(d, ns=b"tenant-a")
    b = client(d, ns=b"tenant-b")
    pa, pb = values(b"a", 24), values(b"b", 24)
    put_written(a, pa)
    put_written(b, pb)
    assert a.delete([pa[0][0], pa[1][0]]) == [St.OK, St.OK]
    assert [bool(x) for x in a.lookup([pa[0][0], pa[1][0], pa[2][0]]).present] == \
        [False, False, True]
    removed = b.reset()
    assert removed == 24
    assert poll(lambda: a.stats()["disk_entries"] == 22, 60), a.stats()
    a.close()
    b.close()
    restart(d)
    a = client(d, ns=b"tenant-a")
    b = client(d, ns=b"tenant-b")
    assert a.get([k for k, _ in pa[:2]]) == [None, None], "deleted keys do not come back"
    assert a.get([k for k, _ in pa[2:]]) == [v for _, v in pa[2:]]
    assert b.lookup([k for k, _ in pb]).leading == 0, "a reset namespace stays empty"
    assert a.stats()["disk_entries"] == 22
    a.close()
    b.close()


# ---- configuration --------------------------------------------------------------------------


def test_capacity_errors_are_clear_at_start(make_daemon, tmp_path):
    # Twice the whole filesystem: refused before any space is reserved.
    fs = os.statvfs(tmp_path)
    too_big = 2 * fs.f_blocks * fs.f_frsize / (1 << 30)
    d = make_daemon(args=disk_args(round(too_big, 1)), start=False)
    d.start(wait=False)
    rc = d.proc.wait(30)
    assert rc == 2
    assert "has no room" in d.stderr() and "kv_disk.capacity_gb" in d.stderr(), d.stderr()
    dat = d.data / "kv-disk" / "shard-0.dat"
    assert not dat.exists() or dat.stat().st_blocks == 0, "no space was taken"
    d.stop(expect_rc=2)
    d = make_daemon(args=disk_args(0.001), start=False, threads=2)
    d.start(wait=False)
    assert d.proc.wait(30) == 2
    assert "kv_disk.capacity_gb" in d.stderr() and "raise it" in d.stderr(), d.stderr()
    d.stop(expect_rc=2)


def test_disk_files_are_private_and_in_the_configured_dirs(kvd, tmp_path):
    dirs = [tmp_path / "nvme0", tmp_path / "nvme1"]
    d = kvd(threads=2, capacity="0.0625", args=disk_args(0.25, dirs=dirs))
    c = client(d)
    put_written(c, values(b"p", 16))
    c.close()
    for i, x in enumerate(dirs):
        for ext in ("dat", "idx"):
            p = x / "kv-disk" / f"shard-{i}.{ext}"
            assert p.exists(), p
            assert (p.stat().st_mode & 0o777) == 0o600
        assert (x / "kv-disk").stat().st_mode & 0o777 == 0o700
    assert not (d.data / "kv-disk").exists()
