"""Healing with a real openlaked, boto3 and the openlake CLI.

On-read heal (a flipped byte in a shard file is repaired after a GET), the
`openlake heal` walk (drives whose objects were wiped get every file back,
byte for byte; an object below k good shards makes it exit 1), the rebuild
of a blank replacement drive at start, the background scanner (finds a
flipped byte without any GET), the admin route's authentication, and drives
that die under load (each drive its own loop-mounted XFS, shut down while
PUTs run, then remounted and healed).
"""
import os
import shutil
import subprocess
import threading
import time
import urllib.error
import urllib.request

import pytest

from conftest import bin_path
from test_s3 import AK, SK, client, multi_drive, shard_files

MIB = 1 << 20


def metrics(d, prefix="openlake_heal_"):
    with urllib.request.urlopen(d.url + "/_openlake/metrics", timeout=10) as r:
        out = {}
        for line in r.read().decode().splitlines():
            if line.startswith(prefix):
                name, value = line.split()
                out[name] = int(value)
        return out


def wait_metric(d, pred, timeout=30):
    deadline = time.time() + timeout
    m = metrics(d)
    while not pred(m):
        assert time.time() < deadline, f"heal metrics never got there: {m}"
        time.sleep(0.1)
        m = metrics(d)
    return m


def files_of(drive, bucket):
    """{relative path: bytes} of every file of bucket's objects on a drive."""
    root = drive / ".openlake" / "buckets" / bucket / "objects"
    return {str(p.relative_to(root)): p.read_bytes() for p in root.rglob("*") if p.is_file()}


def flip(path, off):
    with open(path, "r+b") as f:
        f.seek(off)
        x = f.read(1)
        f.seek(off)
        f.write(bytes([x[0] ^ 0xFF]))


def heal_cli(d, *args):
    sk = d.tmp / "heal.secret"
    sk.write_text(SK + "\n")
    sk.chmod(0o600)
    return subprocess.run([bin_path("openlake"), "heal", *args, "--endpoint", d.url,
                           "--access-key", AK, "--secret-key-file", str(sk)],
                          capture_output=True, text=True, timeout=120)


def fill(c, bucket):
    c.create_bucket(Bucket=bucket)
    bodies = {f"o{n}": os.urandom(n) for n in [0, 10, 5000, 300_000, 3 * MIB + 5]}
    for k, b in bodies.items():
        c.put_object(Bucket=bucket, Key=k, Body=b)
    return bodies


def framed_size(size, k=2, stripe=MIB):
    """Bytes of the blocks of a shard file of an object of size bytes
    (src/store/bitrot.h): blocks of the shard bytes of a stripe, rounded
    up to 64, each after its 8-byte checksum."""
    def shard_len(n):
        return -(-(-(-n // k)) // 64) * 64
    B = shard_len(stripe)
    full, last = divmod(size, k * B)
    return full * (8 + B) + (8 + shard_len(last) if last else 0)


def test_flipped_shard_is_repaired_after_a_get(make_daemon, tmp_path):
    d, drives = multi_drive(make_daemon, tmp_path)
    c = client(d)
    c.create_bucket(Bucket="rot")
    body = os.urandom(2 * MIB + 100)
    c.put_object(Bucket="rot", Key="k", Body=body)
    # the drive holding data shard 0 (a GET reads data shards, not parity):
    # its first block starts, after the 8-byte checksum, with the body's first bytes
    part = next(p for dr in drives for p in shard_files(dr / ".openlake" / "buckets" / "rot")
                if p.read_bytes()[8:72] == body[:64])
    original = part.read_bytes()
    end = framed_size(len(body))
    # a PUT's shard file: its blocks, then zeros to a 4 KiB boundary
    assert len(original) == -(-end // 4096) * 4096 and not any(original[end:])
    flip(part, 100)
    flip(part, end - 3)  # inside the last block
    assert part.read_bytes() != original
    assert c.get_object(Bucket="rot", Key="k")["Body"].read() == body
    m = wait_metric(d, lambda m: m["openlake_heal_objects_healed_total"] >= 1)
    assert m["openlake_heal_queued_total"] >= 1
    assert m["openlake_heal_shards_healed_total"] >= 1
    assert m["openlake_heal_failed_total"] == 0
    assert part.read_bytes() == original
    assert c.get_object(Bucket="rot", Key="k")["Body"].read() == body


def test_get_sends_cached_shards_where_they_lie(make_daemon, tmp_path):
    """Over plain HTTP a GET of an object whose shard files are in the page
    cache verifies and sends the blocks from a mapping of the files (no copy
    into a buffer): whole, ranged and cut short by the client, the bytes
    are right, and a byte flipped in the cached file is still caught."""
    d, drives = multi_drive(make_daemon, tmp_path)
    c = client(d)
    c.create_bucket(Bucket="mapped")
    body = os.urandom(3 * MIB + 777)
    c.put_object(Bucket="mapped", Key="k", Body=body)
    files = [p for dr in drives for p in shard_files(dr / ".openlake" / "buckets" / "mapped")]
    for p in files:
        p.read_bytes()  # into the page cache (the PUT may have written around it)
    m0 = metrics(d, "openlake_store_")
    assert c.get_object(Bucket="mapped", Key="k")["Body"].read() == body
    r = c.get_object(Bucket="mapped", Key="k", Range="bytes=1048000-2097999")
    assert r["Body"].read() == body[1048000:2098000]
    # a client that goes away mid-body leaves nothing behind
    c.get_object(Bucket="mapped", Key="k")["Body"].close()
    m1 = metrics(d, "openlake_store_")
    mapped = m1["openlake_store_get_mapped_bytes_total"] - m0["openlake_store_get_mapped_bytes_total"]
    assert mapped >= len(body) + 1000000
    assert m1["openlake_store_reads_reconstructed_total"] == m0["openlake_store_reads_reconstructed_total"]
    # data shard 0's first block, after its 8-byte checksum, starts with the body
    part = next(p for p in files if p.read_bytes()[8:72] == body[:64])
    flip(part, 100)
    assert c.get_object(Bucket="mapped", Key="k")["Body"].read() == body
    m2 = metrics(d, "openlake_store_")
    assert m2["openlake_store_checksum_failures_total"] > m1["openlake_store_checksum_failures_total"]
    assert m2["openlake_store_reads_reconstructed_total"] > m1["openlake_store_reads_reconstructed_total"]


def test_openlake_heal_restores_wiped_drives(make_daemon, tmp_path):
    """m = 2 drives lose every object: reads and writes go on, then
    `openlake heal` puts every file back, byte for byte."""
    d, drives = multi_drive(make_daemon, tmp_path)
    c = client(d)
    bodies = fill(c, "wipe")
    mp = c.create_multipart_upload(Bucket="wipe", Key="multi")
    parts = [os.urandom(5 * MIB), os.urandom(1234)]
    etags = [c.upload_part(Bucket="wipe", Key="multi", UploadId=mp["UploadId"], PartNumber=i + 1,
                           Body=p)["ETag"] for i, p in enumerate(parts)]
    c.complete_multipart_upload(Bucket="wipe", Key="multi", UploadId=mp["UploadId"],
                                MultipartUpload={"Parts": [{"ETag": e, "PartNumber": i + 1}
                                                           for i, e in enumerate(etags)]})
    bodies["multi"] = b"".join(parts)
    before = [files_of(dr, "wipe") for dr in drives]
    multi_dir = next(p.parent.name for p in
                     (drives[0] / ".openlake" / "buckets" / "wipe").rglob("meta")
                     if b"multi" in p.read_bytes())
    for dr in drives[1:3]:
        shutil.rmtree(dr / ".openlake" / "buckets" / "wipe" / "objects")
    r = heal_cli(d, "wipe")
    assert r.returncode == 0, r.stderr
    assert "objects scanned" in r.stderr
    assert "healed wipe: 6 objects scanned, 6 healed, 0 failed" in r.stdout, r.stdout
    for i, dr in enumerate(drives):
        after = files_of(dr, "wipe")
        assert set(after) == set(before[i]), i
        for path, data in before[i].items():
            if i in (1, 2) and multi_dir in path and "/part." in path:
                # a multipart part file is rebuilt without the part record after its blocks
                assert 0 < len(after[path]) < len(data) and data.startswith(after[path]), path
            else:
                assert after[path] == data, (i, path)
    for k, b in bodies.items():
        assert c.get_object(Bucket="wipe", Key=k)["Body"].read() == b, k
    m = metrics(d)
    assert m["openlake_heal_walk_objects_scanned"] == 6
    assert m["openlake_heal_walk_running"] == 0
    # healthy now: a second walk heals nothing
    r = heal_cli(d, "wipe/o3")
    assert r.returncode == 0, r.stderr
    assert "healed wipe/o3: 2 objects scanned, 0 healed, 0 failed" in r.stdout, r.stdout
    c.put_object(Bucket="wipe", Key="after", Body=b"x" * 1000)
    assert c.get_object(Bucket="wipe", Key="after")["Body"].read() == b"x" * 1000


def test_openlake_heal_fails_below_k_and_touches_nothing(make_daemon, tmp_path):
    d, drives = multi_drive(make_daemon, tmp_path)
    c = client(d)
    c.create_bucket(Bucket="lost")
    c.put_object(Bucket="lost", Key="gone", Body=os.urandom(500_000))
    c.put_object(Bucket="lost", Key="fine", Body=os.urandom(500_000))
    victims = []
    for dr in drives[:3]:
        for meta in (dr / ".openlake" / "buckets" / "lost").rglob("meta"):
            if b"gone" in meta.read_bytes():
                for p in shard_files(meta.parent):
                    p.unlink()
                    victims.append(p)
    assert len(victims) == 3
    r = heal_cli(d, "lost", "--json")
    assert r.returncode == 1, r.stdout + r.stderr
    assert '"scanned":2' in r.stdout and '"failed":1' in r.stdout, r.stdout
    assert "could not be healed" in r.stderr
    assert not any(p.exists() for p in victims)
    assert metrics(d)["openlake_heal_failed_total"] >= 1


def test_heal_route_needs_a_signature_and_one_walk_at_a_time(make_daemon, tmp_path):
    d, _ = multi_drive(make_daemon, tmp_path)
    req = urllib.request.Request(d.url + "/_openlake/heal?bucket=x", method="POST")
    try:
        urllib.request.urlopen(req, timeout=10)
        raise AssertionError("an unsigned heal was accepted")
    except urllib.error.HTTPError as e:
        assert e.code == 403
    r = heal_cli(d, "Bad_Bucket")
    assert r.returncode == 1 and "not a valid bucket name" in r.stderr, r.stderr
    r = subprocess.run([bin_path("openlake"), "heal", "--endpoint", d.url, "--access-key", AK,
                        "--secret-key", "wrong-secret-key-0000"], capture_output=True, text=True,
                       timeout=60)
    assert r.returncode == 1 and "HTTP 403" in r.stderr, r.stderr
    assert "warning: --secret-key on the command line is readable by any local user" in r.stderr
    assert "wrong-secret-key-0000" not in r.stderr
    r = heal_cli(d, "--bogus")
    assert r.returncode == 2
    r = heal_cli(d, "nosuchbucket/x")
    assert r.returncode == 1 and "no such bucket: nosuchbucket" in r.stderr, r.stderr


def test_blank_replacement_drive_is_rebuilt(make_daemon, tmp_path):
    d, drives = multi_drive(make_daemon, tmp_path)
    c = client(d)
    bodies = fill(c, "swap")
    c.create_bucket(Bucket="empty")
    before = files_of(drives[2], "swap")
    d.stop()
    shutil.rmtree(drives[2])
    drives[2].mkdir()                      # a new, empty drive in its place
    d.start()
    m = wait_metric(d, lambda m: m["openlake_heal_walk_id"] >= 1 and
                    m["openlake_heal_walk_running"] == 0)
    assert m["openlake_heal_walk_rebuild"] == 1
    assert m["openlake_heal_walk_objects_healed"] == len(bodies)
    assert files_of(drives[2], "swap") == before
    c = client(d)
    for k, b in bodies.items():
        assert c.get_object(Bucket="swap", Key=k)["Body"].read() == b, k
    assert "walk 1 done" in d.stderr()
    assert (drives[2] / ".openlake" / "buckets" / "empty" / "objects").is_dir()


def test_scanner_finds_a_flipped_byte_without_a_get(make_daemon, tmp_path):
    drives = [tmp_path / f"drive{i}" for i in range(4)]
    for dr in drives:
        dr.mkdir()
    d = make_daemon(args=["--mode", "s3", "--data-dirs", ",".join(map(str, drives)),
                          "--heal-scan-rate-mbps", "50", "--heal-scan-interval-s", "1"],
                    env={"OPENLAKE_ACCESS_KEY": AK, "OPENLAKE_SECRET_KEY": SK})
    c = client(d)
    c.create_bucket(Bucket="scan")
    c.put_object(Bucket="scan", Key="k", Body=os.urandom(MIB))
    part = next(iter(shard_files(drives[3] / ".openlake" / "buckets" / "scan")))
    original = part.read_bytes()
    passes = metrics(d)["openlake_heal_scanner_passes_total"]
    flip(part, 5000)
    m = wait_metric(d, lambda m: m["openlake_heal_objects_healed_total"] >= 1 and
                    m["openlake_heal_scanner_passes_total"] > passes)
    assert m["openlake_heal_queued_total"] == 0           # no read asked for it
    assert m["openlake_heal_scanner_objects_total"] >= 1
    assert m["openlake_heal_scanner_bytes_total"] >= MIB
    assert part.read_bytes() == original


def test_a_drive_that_missed_a_put_is_healed(make_daemon, tmp_path):
    """The write quorum is reached without drive 1 (its bucket directory is
    gone): the PUT succeeds and the drive is queued and healed."""
    d, drives = multi_drive(make_daemon, tmp_path)
    c = client(d)
    c.create_bucket(Bucket="miss")
    shutil.rmtree(drives[1] / ".openlake" / "buckets" / "miss")
    body = os.urandom(400_000)
    c.put_object(Bucket="miss", Key="k", Body=body)
    m = wait_metric(d, lambda m: m["openlake_heal_objects_healed_total"] >= 1)
    assert m["openlake_heal_queued_total"] >= 1
    assert files_of(drives[1], "miss").keys() == files_of(drives[0], "miss").keys()
    assert c.get_object(Bucket="miss", Key="k")["Body"].read() == body


def _open_files_under(pid, root):
    out = []
    for fd in os.listdir(f"/proc/{pid}/fd"):
        try:
            t = os.readlink(f"/proc/{pid}/fd/{fd}")
        except OSError:
            continue
        if t == str(root) or t.startswith(str(root) + "/"):
            out.append(t)
    return out


def test_drives_that_die_during_puts(make_daemon, tmp_path):
    """Each drive its own XFS (a loop device). Three rounds: one drive is
    shut down (XFS_IOC_GOINGDOWN: from then on every call on it fails with
    EIO, as on a disk that died) while twelve clients PUT. PUTs caught at
    any step on that drive still succeed on the write quorum, every
    acknowledged object reads back, the daemon keeps no file of the dead
    drive open but its root, and once the drive is back (remounted, XFS
    replaying its journal) `openlake heal` gives it every object. Which
    step the in-flight PUTs are at when the drive dies differs from run to
    run (shard writes, creating or renaming files, the commit's syncs): the
    invariants hold for every one."""
    if os.geteuid() != 0 or not shutil.which("mkfs.xfs") or not shutil.which("xfs_io"):
        pytest.skip("needs root and xfsprogs (loop-mounted XFS drives)")
    drives, imgs = [], []
    for i in range(4):
        img, dr = tmp_path / f"img{i}", tmp_path / f"drive{i}"
        dr.mkdir()
        subprocess.run(["truncate", "-s", "768M", str(img)], check=True)
        subprocess.run(["mkfs.xfs", "-q", "-f", str(img)], check=True)
        if subprocess.run(["mount", "-o", "loop", str(img), str(dr)]).returncode:
            pytest.skip("cannot loop-mount a filesystem here")
        drives.append(dr)
        imgs.append(img)
    d = None
    try:
        d = make_daemon(args=["--mode", "s3", "--data-dirs", ",".join(map(str, drives))],
                        env={"OPENLAKE_ACCESS_KEY": AK, "OPENLAKE_SECRET_KEY": SK})
        c = client(d)
        c.create_bucket(Bucket="dies")
        acked = {}
        for rnd, victim in enumerate((2, 0, 3)):
            errors, stop, before = [], threading.Event(), len(acked)

            def put_loop(t):
                cl = client(d)
                i = 0
                while not stop.is_set():
                    key = f"r{rnd}/t{t}/{i}"
                    body = os.urandom(150_000 + (i * 37_000 + t * 91_000) % 250_000)
                    try:
                        cl.put_object(Bucket="dies", Key=key, Body=body)
                        acked[key] = body
                    except Exception as e:  # noqa: BLE001  (every failure is the test's)
                        errors.append(f"{key}: {e!r}")
                    i += 1
            threads = [threading.Thread(target=put_loop, args=(t,)) for t in range(12)]
            for th in threads:
                th.start()
            # 12 acks before the drive dies and 12 after, however slowly they
            # come (polled, not timed); the failure counter moves meanwhile.
            deadline = time.time() + 120
            while len(acked) - before < 12 and not errors:
                assert time.time() < deadline, (rnd, len(acked) - before)
                time.sleep(0.05)
            alive = len(acked)
            fails = metrics(d, "openlake_store_")["openlake_store_write_drive_failures_total"]
            subprocess.run(["xfs_io", "-x", "-c", "shutdown", str(drives[victim])], check=True)
            while (len(acked) - alive < 12 or metrics(d, "openlake_store_")[
                    "openlake_store_write_drive_failures_total"] <= fails) and not errors:
                assert time.time() < deadline, (rnd, len(acked) - alive)
                time.sleep(0.05)
            stop.set()
            for th in threads:
                th.join(timeout=60)
            assert not errors, (rnd, errors[:5])
            assert alive - before >= 12 and len(acked) - alive >= 12, (rnd, before, alive, len(acked))
            assert metrics(d, "openlake_store_")["openlake_store_write_drive_failures_total"] > fails
            for k, b in acked.items():
                assert c.get_object(Bucket="dies", Key=k)["Body"].read() == b, k
            left = _open_files_under(d.pid(), drives[victim])
            assert all(p == str(drives[victim]) for p in left), (rnd, left)
            # the drive comes back: stop, remount (XFS replays its journal), start, heal
            d.stop()
            subprocess.run(["umount", str(drives[victim])], check=True)
            subprocess.run(["mount", "-o", "loop", str(imgs[victim]), str(drives[victim])],
                           check=True)
            d.start()
            r = heal_cli(d, "dies")
            assert r.returncode == 0, r.stdout + r.stderr
            want = files_of(drives[(victim + 1) % 4], "dies").keys()
            assert files_of(drives[victim], "dies").keys() == want, rnd
        for k, b in acked.items():
            assert c.get_object(Bucket="dies", Key=k)["Body"].read() == b, k
    finally:
        try:
            if d is not None and d.proc is not None and d.proc.poll() is None:
                d.stop()
        finally:
            for dr in drives:
                subprocess.run(["umount", str(dr)])
