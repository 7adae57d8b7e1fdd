"""Black-box test of the per-namespace RAM quota ([kv_slab] namespace_quota_gb,
docs/kv-protocol.md "Quota"): a tenant over its quota loses its own oldest
entries, never another tenant's; with all of its entries pinned it gets
QUOTA; STATS entries/bytes_used are per namespace.
"""
from kvwire import KvClient, St
from test_kv import TOKEN, blob, hermetic_openlake_env, kvd  # noqa: F401

MIB = 1 << 20


def test_a_tenant_over_its_quota_evicts_only_its_own_oldest(kvd):
    d = kvd(threads=1, capacity="0.125", args=["--kv-slab.namespace-quota-gb", "0.03125"])
    a = KvClient(d.kv_sock, TOKEN, ns=b"tenant-a", value_size=MIB, shm=True)
    b = KvClient(d.kv_sock, TOKEN, ns=b"tenant-b", value_size=MIB, shm=True)
    pb = [(b"b-%03d" % i, blob(b"b-%03d" % i, n=MIB)) for i in range(16)]
    assert b.put(pb) == [St.OK] * 16
    pa = [(b"a-%03d" % i, blob(b"a-%03d" % i, n=MIB)) for i in range(48)]
    for i in range(0, 48, 8):
        assert a.put(pa[i:i + 8]) == [St.OK] * 8
    sa, sb = a.stats(), b.stats()
    assert sa["entries"] == 32 and sa["bytes_used"] == 32 * MIB, sa   # 32 MiB quota
    assert sb["entries"] == 16, sb
    assert sa["evictions"] == 16
    look = a.lookup([k for k, _ in pa])
    assert [bool(x) for x in look.present] == [False] * 16 + [True] * 32, "its oldest went"
    assert b.get([k for k, _ in pb]) == [v for _, v in pb], "the other tenant kept everything"
    # every entry of tenant a pinned: nothing of its own can go, so QUOTA
    conn = a.conns[0]
    acq = conn.acquire([k for k, _ in pa[16:]])
    assert all(r.status == St.OK for r in acq)
    res = conn.reserve([b"a-new"])
    assert res[0].status == St.QUOTA
    assert b.put([(b"b-new", b"fine")]) == [St.OK]
    conn.release([(r.slot, r.gen) for r in acq])
    assert a.put([(b"a-new", blob(b"a-new", n=MIB))]) == [St.OK]
    a.close()
    b.close()
