"""Black-box tests of the KV slab's memory (docs/kv-slab.md, "Backing"):
what backs it, as the log, the banner and the metrics say, checked against
what this host offers (sysfs, /proc/meminfo).
"""
import re
import signal
import urllib.request

import pytest

import conftest
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
    d = kvd()
    before = metric(d, "openlake_kv_tenant_slab_allocated_bytes")
    size = metric(d, "openlake_kv_tenant_slab_bytes")
    assert 0 < before < size // 4, (before, size)   # the superblock, not the values
    with session(d) as c:
        vals = [(k, bytes([i]) * 65536) for i, k in enumerate(keys_of(b"alloc", 64))]
        assert c.put(vals) == [0] * 64
    after = metric(d, "openlake_kv_tenant_slab_allocated_bytes")
    assert after >= before + 64 * 65536, (before, after)
