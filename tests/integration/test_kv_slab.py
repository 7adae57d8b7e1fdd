"""Black-box tests of the KV slab's memory (docs/kv-slab.md, "Backing" and
"Populating"): what backs it, as the log, the banner and the metrics say,
checked against what this host offers (sysfs, /proc/meminfo); and the
background thread that allocates its pages (kv_slab.populate), over values
being written and read.
"""
import hashlib
import os
import re
import signal
import time
import urllib.request

import pytest

import conftest
import kvwire
from test_kv import TOKEN, kvd, keys_of, poll, session  # noqa: F401  (kvd is a fixture)

THP = "/sys/kernel/mm/transparent_hugepage/"


@pytest.fixture(autouse=True)
def hermetic_openlake_env(monkeypatch):
    pinned = conftest.bin_dir()
    monkeypatch.setattr(conftest, "bin_dir", lambda: pinned)
    for k in list(conftest.os.environ):
        if k.startswith("OPENLAKE_"):
            monkeypatch.delenv(k)


def metrics(d):
    return urllib.request.urlopen(f"{d.url}/_openlake/metrics", timeout=10).read().decode()


def metric(d, name, tenant="default"):
    text = metrics(d)
    m = re.search(r'^%s\{tenant="%s"\} (\d+)$' % (re.escape(name), tenant), text, re.M)
    assert m, f"{name}{{tenant={tenant}}} not in the metrics:\n{text}"
    return int(m.group(1))


def setting(path):
    """The bracketed choice of a sysfs file, or None."""
    try:
        with open(path) as f:
            m = re.search(r"\[(\w+)\]", f.read())
    except OSError:
        return None
    return m.group(1) if m else None


def host_thp():
    """Whether this host gives a MADV_HUGEPAGE'd memfd 2 MiB pages."""
    w = setting(THP + "hugepages-2048kB/shmem_enabled")
    if w in (None, "inherit"):
        w = setting(THP + "shmem_enabled")
    return w in ("always", "within_size", "advise", "force")


def hugetlb_pool():
    with open("/proc/meminfo") as f:
        m = dict(re.findall(r"^(HugePages_Total|HugePages_Free):\s+(\d+)", f.read(), re.M))
    return int(m.get("HugePages_Total", 0)), int(m.get("HugePages_Free", 0))


def test_log_banner_and_metric_say_what_backs_the_slab(kvd):
    d = kvd(threads=2)
    log = d.stderr()
    m = re.search(r"kv slab: (\d+\.\d\d) GiB in 2 shards, (.*)$", log, re.M)
    assert m, "no 'kv slab:' line in the log:\n" + log
    assert float(m.group(1)) == pytest.approx(metric(d, "openlake_kv_tenant_slab_bytes") / 2**30,
                                              abs=0.01)
    what = m.group(2)
    info = re.search(r'^openlake_kv_slab_info\{tenant="default",backing="(\w+)"\} 1$',
                     metrics(d), re.M)
    assert info, metrics(d)
    backing = info.group(1)
    total, _ = hugetlb_pool()
    if backing == "hugetlb":
        assert total > 0
        assert re.fullmatch(r"hugetlbfs \d+ [MG]iB pages", what), what
    elif backing == "shmem_thp":
        assert host_thp(), what
        assert re.fullmatch(r"shmem with THP \((hugepages-2048kB/)?shmem_enabled=\w+\)", what), what
    else:
        assert backing == "shmem" and not host_thp(), (backing, what)
        assert what.startswith("shmem, 4 KiB pages (")
        # how to get the faster pages: shmem THP, and hugetlb pages for this slab
        assert "echo advise > " + THP in what or "no shmem THP" in what, what
        need = -(-metric(d, "openlake_kv_tenant_slab_bytes") // (2 << 20))
        assert "vm.nr_hugepages" in what and f" {need} " in what, (need, what)
    # the banner (stdout) says the same
    d.signal(signal.SIGTERM)
    d.proc.wait(timeout=30)
    banner = d.proc.stdout.read()
    assert re.search(r"^  KV slab: +\d+\.\d GiB in 2 shards, " + re.escape(what) + "$", banner,
                     re.M), banner
    d.stop()


def test_allocated_bytes_follow_what_is_written(kvd):
    d = kvd(args=["--kv-slab.populate", "off"])
    before = metric(d, "openlake_kv_tenant_slab_allocated_bytes")
    size = metric(d, "openlake_kv_tenant_slab_bytes")
    assert 0 < before < size // 4, (before, size)   # the superblock, not the values
    with session(d) as c:
        vals = [(k, bytes([i]) * 65536) for i, k in enumerate(keys_of(b"alloc", 64))]
        assert c.put(vals) == [0] * 64
    after = metric(d, "openlake_kv_tenant_slab_allocated_bytes")
    assert after >= before + 64 * 65536, (before, after)


def populated(d, tenant="default"):
    return metric(d, "openlake_kv_tenant_slab_populated_bytes", tenant)


def test_populate_off_leaves_pages_to_first_use(kvd):
    d = kvd(args=["--kv-slab.populate", "off"])
    with session(d) as c:
        assert c.put([(b"k", b"v" * 5000)]) == [0]
    poll(lambda: False, timeout=0.5)    # what a background pass would have started by now
    assert populated(d) == 0
    assert metric(d, "openlake_kv_tenant_slab_allocated_bytes") < metric(
        d, "openlake_kv_tenant_slab_bytes") // 4
    assert "populated" not in d.stderr()


def test_populate_background_fills_the_slab_under_live_values(kvd):
    # 2 shards, 0.5 GiB: population takes a while on this VM (tenths of a
    # second), and values go in from the first moment the daemon is ready,
    # on both shards, onto the pages it populates first.
    d = kvd(threads=2, capacity="0.5", args=["--kv-slab.populate", "background"])
    size = metric(d, "openlake_kv_tenant_slab_bytes")
    ks = keys_of(b"live", 256)
    vals = {k: hashlib.shake_128(k).digest(40000 + 97 * i) for i, k in enumerate(ks)}
    during = []
    conns = [session(d, shard=s) for s in range(2)]
    try:
        for i in range(0, len(ks), 16):
            for s, c in enumerate(conns):
                mine = [(k, vals[k]) for k in ks[i:i + 16] if kvwire.shard_of(b"test", k, 2) == s]
                if mine:
                    assert c.put(mine) == [0] * len(mine)
            during.append(populated(d))
        assert poll(lambda: populated(d) == size, timeout=120), (populated(d), size, d.stderr())
        assert metric(d, "openlake_kv_tenant_slab_allocated_bytes") == size
        # every value reads back byte for byte (and passes its checksums)
        for s, c in enumerate(conns):
            mine = [k for k in ks if kvwire.shard_of(b"test", k, 2) == s]
            assert c.get(mine) == [vals[k] for k in mine]
    finally:
        for c in conns:
            c.close()
    print(f"populated bytes while writing: {during[0]} .. {during[-1]} of {size}")
    m = re.search(r"kv slab: populated (\d+\.\d\d) GiB in (\d+\.\d\d) s \(MADV_POPULATE_WRITE\)",
                  d.stderr())
    assert m, d.stderr()
    assert float(m.group(1)) == pytest.approx(size / 2**30, abs=0.01)
    # new values still land and read back after it is done
    with session(d, shard=0) as c:
        k = next(k for k in keys_of(b"after", 64) if kvwire.shard_of(b"test", k, 2) == 0)
        assert c.put([(k, b"z" * 60000)]) == [0]
        assert c.get([k]) == [b"z" * 60000]


def test_stop_while_populating(kvd):
    # SIGTERM right at ready: the thread stops (within one range) before the
    # slab goes; it never works on a closed memfd (it would warn) and the
    # daemon exits 0 (conftest: within the timeout, no sanitizer report).
    d = kvd(capacity="1", args=["--kv-slab.populate", "background"])
    t0 = time.time()
    d.stop(timeout=10)
    assert "populating stopped" not in d.stderr(), d.stderr()
    print(f"stopped in {time.time() - t0:.2f} s; populated: "
          f"{'kv slab: populated' in d.stderr()}")


def memory_cgroup_v1():
    """This process's cgroup v1 memory directory, or None."""
    base = "/sys/fs/cgroup/memory"
    if os.getuid() != 0 or not os.path.isdir(base):
        return None
    with open("/proc/self/cgroup") as f:
        for line in f:
            _, ctl, path = line.rstrip("\n").split(":", 2)
            if "memory" in ctl.split(","):
                d = base + path.rstrip("/")
                return d if os.access(d, os.W_OK) else None
    return None


def test_populate_skipped_when_the_slab_is_bigger_than_the_memory_left(kvd):
    # A 2 GiB slab in a cgroup limited to 1 GiB (no swap here): populating
    # it would commit more than the limit, and the kernel's OOM killer would
    # end the daemon at start. It says so and leaves the pages to first use;
    # the daemon serves.
    parent = memory_cgroup_v1()
    if parent is None:
        pytest.skip("needs root and a cgroup v1 memory hierarchy (this host's kind)")
    cg = f"{parent}/olt-populate-{os.getpid()}"
    os.mkdir(cg)
    try:
        with open(f"{cg}/memory.limit_in_bytes", "w") as f:
            f.write(str(1 << 30))
        # the daemon is born in the cgroup: this process joins it for the
        # fork and leaves right after
        with open(f"{cg}/cgroup.procs", "w") as f:
            f.write(str(os.getpid()))
        try:
            d = kvd(capacity="2", args=["--kv-slab.populate", "background"])
        finally:
            with open(f"{parent}/cgroup.procs", "w") as f:
                f.write(str(os.getpid()))
        assert poll(lambda: "not populating" in d.stderr(), timeout=30), d.stderr()
        assert re.search(r"kv slab: not populating: its 2\.\d\d GiB without pages are more than "
                         r"90 % of the \d+\.\d\d GiB this process may still take", d.stderr()), d.stderr()
        with session(d) as c:
            assert c.put([(b"after", b"v" * 5000)]) == [0]
            assert c.get([b"after"])[0] == b"v" * 5000
        assert populated(d) == 0
        assert d.proc.poll() is None
        d.stop()
    finally:
        # the daemon has exited (stop) or is killed with the test's daemons;
        # the cgroup goes once empty
        for _ in range(100):
            try:
                os.rmdir(cg)
                break
            except OSError:
                time.sleep(0.1)
