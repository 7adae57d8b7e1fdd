"""Black-box tests of KV tenants ([[kv_tenants]], docs/configuration.md "KV
tenants", docs/security.md): a tenant's token opens its namespaces only, and
its values live in a slab of its own, so a client of another tenant can
neither ask for them nor find their bytes anywhere in what it maps.

Real daemons with two tenants, a ("a/*") and b ("b/*"), each with a token
file; kv_token is the admin token. The strict wire client of kvwire.py maps
slabs and searches them; the real Python client (openlake_client) writes
where it is installed.
"""
import hashlib
import os
import re
import signal
import time
import urllib.request

import pytest

import kvwire
from kvwire import KvClient, KvConn, KvError, Op, St
from test_kv import TOKEN, hermetic_openlake_env, kvd, poll, tcp, wait_kv  # noqa: F401

MIB = 1 << 20
VS = 65536
TOKEN_A = "tenant-a-token-0123456789"
TOKEN_B = "tenant-b-token-9876543210"
CAP_A = 0.046875   # GiB: 48 MiB
CAP_B = 0.03125    # GiB: 32 MiB
CAP_DEFAULT = "0.0625"

# A distinctive 64 KiB value: found in A's slab, searched for in every other.
SECRET_A = hashlib.shake_256(b"tenant a's secret block").digest(VS)
SECRET_B = hashlib.shake_256(b"tenant b's secret block").digest(VS)


def slab_size(capacity_gb, shards):
    """The region size for a slab of capacity_gb (docs/kv-slab.md, "Region")."""
    npages = max(int(capacity_gb * (1 << 30)) // (2 * MIB), shards)
    data_off = -(-(4096 + npages * 128 * 256) // (2 * MIB)) * (2 * MIB)
    return data_off + npages * 2 * MIB


def tenants_toml(tmp, extra_a="", extra_b="", cap_a=CAP_A):
    """The two tenants' config; token files written 0600 beside it."""
    for name, tok in (("a", TOKEN_A), ("b", TOKEN_B)):
        p = tmp / f"{name}.token"
        p.write_text(tok + "\n")
        os.chmod(p, 0o600)
    return (f'[[kv_tenants]]\nname = "a"\ntoken_file = "{tmp}/a.token"\n'
            f'namespaces = ["a/*"]\ncapacity_gb = {cap_a}\n{extra_a}\n'
            f'[[kv_tenants]]\nname = "b"\ntoken_file = "{tmp}/b.token"\n'
            f'namespaces = ["b/*"]\ncapacity_gb = {CAP_B}\n{extra_b}')


@pytest.fixture
def tenants(kvd, tmp_path):
    """Factory: a running daemon with tenants a and b (threads=2 by default)."""
    made = []

    def factory(threads=2, extra_a="", extra_b="", cap_a=CAP_A, args=()):
        made.append(1)
        cfg = tmp_path / f"tenants-{len(made)}.toml"
        cfg.write_text(tenants_toml(tmp_path, extra_a, extra_b, cap_a))
        return kvd(threads=threads, capacity=CAP_DEFAULT, args=["--config", str(cfg), *args])
    return factory


def refused(addr, token, ns, shm=False):
    """HELLO with token for ns is answered UNAUTHORIZED, nothing mapped, closed."""
    c = KvConn(addr)
    with pytest.raises(KvError) as e:
        c.hello(token, ns, VS, shm=shm)
    assert e.value.status == St.UNAUTHORIZED, f"{token!r} on {ns!r}: {e.value}"
    assert not c.fds, f"a slab descriptor went to a refused HELLO ({token!r} on {ns!r})"
    c.expect_closed()
    c.close()


def metric(d, name, tenant):
    text = urllib.request.urlopen(f"{d.url}/_openlake/metrics", timeout=10).read().decode()
    m = re.search(r'^%s\{tenant="%s"\} (\d+)$' % (re.escape(name), tenant), text, re.M)
    assert m, f"{name}{{tenant={tenant}}} not in the metrics:\n{text}"
    return int(m.group(1))


def keys(prefix, n):
    return [b"%s-%03d" % (prefix, i) for i in range(n)]


def tcp_put(c, pairs):
    """PUT over a TCP KvClient: one frame per shard; a status per pair."""
    out = [None] * len(pairs)
    for s, items in c._split([k for k, _ in pairs]).items():
        st, res = c.conns[s].request(Op.PUT, [pairs[i] for i, _ in items])
        assert st == St.OK, res
        for (i, _), r in zip(items, res):
            out[i] = r
    return out


def tcp_get(c, ks):
    """GET over a TCP KvClient: the values (None: not found)."""
    return [r.value for r in c._fanout(Op.GET, ks)]


def mapped(c):
    """Every byte of the slab a kvwire client mapped (all its shards share it)."""
    return c.conns[0].slab.map


# ---- isolation over shared memory ---------------------------------------------------------


def test_another_tenant_maps_none_of_a_tenants_bytes(tenants):
    d = tenants()
    ka = keys(b"blk", 24)
    with KvClient(d.kv_sock, TOKEN_A, ns=b"a/llama", value_size=VS, shm=True) as a:
        assert a.put([(k, SECRET_A) for k in ka]) == [St.OK] * len(ka)
        assert a.info["slab_size"] == slab_size(CAP_A, 2)
        assert mapped(a).find(SECRET_A[:4096]) >= 0, "control: A's own slab holds its values"
        assert a.get(ka[:3]) == [SECRET_A] * 3
        with KvClient(d.kv_sock, TOKEN_B, ns=b"b/llama", value_size=VS, shm=True) as b:
            assert b.put([(k, SECRET_B) for k in ka]) == [St.OK] * len(ka)  # same keys, its own
            assert b.info["slab_size"] == slab_size(CAP_B, 2)
            mb = mapped(b)
            assert len(mb) == b.info["slab_size"]
            # B's whole mapping: not one 4 KiB piece of A's values, and the
            # same the other way round
            for off in range(0, VS, 4096):
                assert mb.find(SECRET_A[off:off + 4096]) == -1, f"A's bytes at {off} in B's slab"
                assert mapped(a).find(SECRET_B[off:off + 4096]) == -1, "B's bytes in A's slab"
            assert mb.find(SECRET_B[:4096]) >= 0, "control: B's slab holds B's values"
            # under its own namespace A's keys are B's own values, never A's
            assert b.get(ka) == [SECRET_B] * len(ka)
            assert b.stats()["entries"] == len(ka)
            assert b.stats()["bytes_capacity"] != a.stats()["bytes_capacity"]
            # and B's token does not open A's namespace on either socket
            refused(d.kv_sock, TOKEN_B, b"a/llama", shm=True)
            refused(tcp(d), TOKEN_B, b"a/llama")
            refused(d.kv_sock, TOKEN_B, b"a/", shm=True)
    # the default slab (admin token, an unclaimed namespace) holds neither
    with KvClient(d.kv_sock, TOKEN, ns=b"plain", value_size=VS, shm=True) as adm:
        assert adm.info["slab_size"] == slab_size(float(CAP_DEFAULT), 2)
        assert mapped(adm).find(SECRET_A[:4096]) == -1
        assert mapped(adm).find(SECRET_B[:4096]) == -1


def test_python_client_of_another_tenant_is_refused(tenants, tmp_path):
    openlake_client = pytest.importorskip(
        "openlake_client", reason="pip install . (scripts/deps.sh test does it)")
    from openlake_client import NOT_FOUND, OK, Client
    d = tenants()
    ka = [b"py-%d" % i for i in range(8)]
    with Client(d.kv_sock, token_file=str(tmp_path / "a.token"), namespace="a/py",
                value_size=VS) as a:
        assert a.shared_memory and a.put(ka, [SECRET_A] * len(ka)) == [OK] * len(ka)
    with pytest.raises(PermissionError):
        Client(d.kv_sock, token_file=str(tmp_path / "b.token"), namespace="a/py", value_size=VS)
    with pytest.raises(PermissionError):
        Client(f"127.0.0.1:{d.kv_port}", token_file=str(tmp_path / "b.token"), namespace="a/py")
    with Client(d.kv_sock, token_file=str(tmp_path / "b.token"), namespace="b/py",
                value_size=VS) as b:
        outs = [bytearray(VS) for _ in ka]
        assert b.get(ka, outs) == [-NOT_FOUND] * len(ka)
    # the admin token reads A's values through A's slab
    with Client(d.kv_sock, token=TOKEN, namespace="a/py", value_size=VS) as adm:
        outs = [bytearray(VS) for _ in ka]
        assert adm.get(ka, outs) == [VS] * len(ka)
        assert all(bytes(o) == SECRET_A for o in outs)


# ---- who may open what ------------------------------------------------------------------------


def test_tokens_open_their_tenants_namespaces_only(tenants):
    d = tenants()
    before = {t: metric(d, "openlake_kv_hello_refused_total", t) for t in ("a", "b", "default")}
    with KvClient(d.kv_sock, TOKEN_A, ns=b"a/x", value_size=VS, shm=True) as a:
        assert a.put([(b"k1", SECRET_A)]) == [St.OK]
        a_size = a.info["slab_size"]
        assert a.stats()["sessions"] == 2        # the tenant's sessions: its two shards
    for unix in (True, False):
        addr = d.kv_sock if unix else tcp(d)
        refused(addr, TOKEN_A, b"b/x", shm=unix)        # another tenant's namespace
        refused(addr, TOKEN_A, b"plain", shm=unix)      # a namespace no tenant claims
        refused(addr, TOKEN_A, b"a", shm=unix)          # "a/*" does not claim "a"
        refused(addr, TOKEN_B, b"a/x", shm=unix)
        refused(addr, b"nope", b"a/x", shm=unix)        # a bad token: the same answer
    assert metric(d, "openlake_kv_hello_refused_total", "a") == before["a"] + 4
    assert metric(d, "openlake_kv_hello_refused_total", "b") == before["b"] + 2
    assert metric(d, "openlake_kv_hello_refused_total", "default") == before["default"] + 4
    # the admin token opens A's namespace, through A's slab, and sees A's value
    with KvClient(d.kv_sock, TOKEN, ns=b"a/x", value_size=VS, shm=True) as adm:
        assert adm.info["slab_size"] == a_size == slab_size(CAP_A, 2)
        assert adm.get([b"k1"]) == [SECRET_A]
        assert mapped(adm).find(SECRET_A[:4096]) >= 0
        st = adm.stats()
        assert st["entries"] == 1 and st["bytes_capacity"] == 24 * 2 * MIB, st
    # A's token opens any namespace under "a/", each its own key space
    with KvClient(tcp(d), TOKEN_A, ns=b"a/other") as a2:
        assert tcp_get(a2, [b"k1"]) == [None]
    # the HELLO that a shard of core 1 needs is handed over with its tenant
    c = KvConn(d.kv_sock)
    info = c.hello(TOKEN_B, b"b/x", VS, shard=1, shm=True)
    assert info["slab_size"] == slab_size(CAP_B, 2)
    c.close()
    assert metric(d, "openlake_kv_tenant_slab_bytes", "a") == slab_size(CAP_A, 2)
    assert metric(d, "openlake_kv_tenant_slab_bytes", "default") == slab_size(
        float(CAP_DEFAULT), 2)
    # every tenant's slab gets its pages in the background (kv_slab.populate)
    deadline = time.time() + 60
    while any(metric(d, "openlake_kv_tenant_slab_populated_bytes", t) <
              metric(d, "openlake_kv_tenant_slab_bytes", t) for t in ("default", "a", "b")):
        assert time.time() < deadline, d.stderr()
        time.sleep(0.05)
    assert re.search(r"kv tenant b: slab populated, \d+\.\d\d GiB in", d.stderr())


def test_tcp_put_and_get_keep_tenants_apart(tenants):
    d = tenants()
    ka = keys(b"tcp", 12)
    vals = [hashlib.shake_128(k).digest(3000 + 100 * i) for i, k in enumerate(ka)]
    with KvClient(tcp(d), TOKEN_A, ns=b"a/tcp") as a:
        assert tcp_put(a, list(zip(ka, vals))) == [St.OK] * len(ka)
        assert tcp_get(a, ka) == vals
    with KvClient(tcp(d), TOKEN_B, ns=b"b/tcp") as b:
        assert tcp_get(b, ka) == [None] * len(ka)
        assert b.lookup(ka).leading == 0
        assert tcp_put(b, [(ka[0], b"b's own")]) == [St.OK]
    refused(tcp(d), TOKEN_B, b"a/tcp")
    # the values A put over TCP are in A's slab: A's shared-memory client and
    # the admin token (over TCP) read them
    with KvClient(d.kv_sock, TOKEN_A, ns=b"a/tcp", value_size=VS, shm=True) as a:
        assert a.get(ka) == vals
    with KvClient(tcp(d), TOKEN, ns=b"a/tcp") as adm:
        assert tcp_get(adm, ka) == vals
        assert adm.delete(ka[:1]) == [St.OK]
    with KvClient(tcp(d), TOKEN_B, ns=b"b/tcp") as b:
        assert tcp_get(b, ka[:1]) == [b"b's own"]    # the admin's delete was A's key only


# ---- configuration errors ----------------------------------------------------------------------


def start_fails(make_daemon, tmp_path, toml, args=()):
    """Starts openlaked with toml; asserts exit 2 and returns its stderr."""
    cfg = tmp_path / "bad.toml"
    cfg.write_text(toml)
    d = make_daemon(args=["--config", str(cfg), "--kv-token", TOKEN, *args], start=False)
    d.start(wait=False)
    rc = d.proc.wait(timeout=30)
    err = d.stderr()
    d.stop(expect_rc=None)
    assert rc == 2, f"exit {rc}, stderr:\n{err}"
    return err


def test_bad_tenant_configs_stop_the_start(make_daemon, tmp_path):
    good = tenants_toml(tmp_path)
    overlap = good + (f'[[kv_tenants]]\nname = "c"\ntoken_file = "{tmp_path}/c.token"\n'
                      f'namespaces = ["c/*", "a/x"]\ncapacity_gb = 0.01\n')
    (tmp_path / "c.token").write_text("tenant-c-token\n")
    os.chmod(tmp_path / "c.token", 0o600)
    err = start_fails(make_daemon, tmp_path, overlap)
    assert ('kv_tenants.namespaces: "a/x" overlaps "a/*" of tenant "a" (line 1): '
            "a namespace belongs to one tenant") in err, err
    dup = good.replace('name = "b"', 'name = "a"')
    err = start_fails(make_daemon, tmp_path, dup)
    assert 'kv_tenants.name: tenant name "a" is used twice (first at line 1)' in err, err
    missing = good.replace(f"{tmp_path}/b.token", f"{tmp_path}/none.token")
    err = start_fails(make_daemon, tmp_path, missing)
    assert (f"kv_tenants.token_file: {tmp_path}/none.token: cannot open: No such file or "
            "directory") in err, err
    same = good.replace(f"{tmp_path}/b.token", f"{tmp_path}/a.token")
    err = start_fails(make_daemon, tmp_path, same)
    assert 'holds the token of tenant "a" (line 1); each tenant needs its own' in err, err
    (tmp_path / "admin.token").write_text(TOKEN)
    admin = good.replace(f"{tmp_path}/b.token", f"{tmp_path}/admin.token")
    err = start_fails(make_daemon, tmp_path, admin)
    assert "holds kv_token, which opens every namespace" in err, err
    assert TOKEN not in err and TOKEN_A not in err, "a token in an error message"


def test_tenant_token_equal_to_the_generated_admin_token_stops_the_start(kvd, make_daemon,
                                                                          tmp_path):
    d = kvd(token=None)                      # makes kv.token in its data dir
    admin = (d.data / "kv.token").read_text()
    d.stop()
    (tmp_path / "x.token").write_text(admin)
    cfg = tmp_path / "x.toml"
    cfg.write_text(f'[[kv_tenants]]\nname = "x"\ntoken_file = "{tmp_path}/x.token"\n'
                   f'namespaces = ["x/*"]\ncapacity_gb = 0.01\n')
    d.args += ["--config", str(cfg)]
    d.start(wait=False)
    rc = d.proc.wait(timeout=30)
    err = d.stderr()
    d.stop(expect_rc=None)
    assert rc == 2, err
    assert (f"kv tenant x: its token_file {tmp_path}/x.token holds the admin token "
            f"({d.data}/kv.token)") in err, err
    assert admin not in err


# ---- disk tier per tenant ------------------------------------------------------------------------


def test_a_tenants_disk_tier_is_its_own_and_survives_restart(tenants):
    # A: a 16 MiB slab over a 256 MiB disk tier; B: a disk tier of its own;
    # the default tenant none
    d = tenants(threads=1, cap_a=0.015625, extra_a="disk_capacity_gb = 0.25\n",
                extra_b="disk_capacity_gb = 0.0625\n")
    tdir = d.data / "kv-disk" / "tenant-a"
    assert (tdir / "shard-0.dat").exists() and (tdir / "shard-0.idx").exists()
    assert (d.data / "kv-disk" / "tenant-b" / "shard-0.dat").exists()
    assert not (d.data / "kv-disk" / "shard-0.dat").exists(), "a disk tier for default"
    ka = keys(b"disk", 40)
    vals = [hashlib.shake_128(k).digest(MIB) for k in ka]      # 40 MiB through 16 MiB
    with KvClient(d.kv_sock, TOKEN_A, ns=b"a/disk", value_size=MIB, shm=True) as a:
        for i in range(0, len(ka), 4):
            assert a.put(list(zip(ka[i:i + 4], vals[i:i + 4]))) == [St.OK] * 4
            assert poll(lambda: a.stats()["disk_entries"] >= i + 4, 30), a.stats()
        st = a.stats()
        assert st["evictions"] > 0 and st["disk_entries"] == len(ka), st
        assert a.get(ka[:4]) == vals[:4]                     # read back from A's disk
    with KvClient(d.kv_sock, TOKEN_B, ns=b"b/disk", value_size=MIB, shm=True) as b:
        st = b.stats()
        assert st["disk_entries"] == 0 and st["entries"] == 0, st
        assert b.get(ka[:4]) == [None] * 4
    d.stop()
    # nothing of A's on B's files
    with open(d.data / "kv-disk" / "tenant-b" / "shard-0.dat", "rb") as f:
        bdata = f.read()
    assert all(bdata.find(v[:4096]) == -1 for v in vals), "A's value in B's disk tier"
    d.start(wait=False)
    wait_kv(d)
    with KvClient(d.kv_sock, TOKEN_A, ns=b"a/disk", value_size=MIB, shm=True) as a:
        assert a.stats()["disk_entries"] == len(ka)
        for i in range(0, len(ka), 4):      # a frame's values must fit the 16 MiB slab
            assert a.get(ka[i:i + 4]) == vals[i:i + 4]
    refused(d.kv_sock, TOKEN_B, b"a/disk", shm=True)
    with KvClient(d.kv_sock, TOKEN, ns=b"a/disk", value_size=MIB, shm=True) as adm:
        assert adm.get(ka[-2:]) == vals[-2:]


def test_kill_9_keeps_tenants_apart_after_restart(tenants):
    d = tenants(threads=1, extra_a="disk_capacity_gb = 0.0625\n")
    with KvClient(d.kv_sock, TOKEN_A, ns=b"a/k", value_size=VS, shm=True) as a:
        assert a.put([(b"k", SECRET_A)]) == [St.OK]
        assert poll(lambda: a.stats()["disk_entries"] == 1, 30)
    d.proc.send_signal(signal.SIGKILL)
    d.proc.wait()
    d.stop(expect_rc=None)
    if os.path.exists(d.kv_sock):
        os.unlink(d.kv_sock)
    d.start(wait=False)
    wait_kv(d)
    with KvClient(d.kv_sock, TOKEN_A, ns=b"a/k", value_size=VS, shm=True) as a:
        assert a.get([b"k"]) == [SECRET_A]
    with KvClient(d.kv_sock, TOKEN_B, ns=b"b/k", value_size=VS, shm=True) as b:
        assert b.get([b"k"]) == [None]
        assert mapped(b).find(SECRET_A[:4096]) == -1
