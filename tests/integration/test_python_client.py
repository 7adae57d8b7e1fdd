"""The Python package openlake-vllm (module openlake_client, a C extension
over the C client) against a real two-shard daemon: buffers of every kind
in and out, both transports, namespaces, errors, and threads sharing one
client while the GIL is released."""
import array
import os
import threading

import pytest

openlake_client = pytest.importorskip(
    "openlake_client", reason="pip install ./python (scripts/deps.sh test does it)")
from openlake_client import EXISTS, NOT_FOUND, OK, TOO_LARGE, Client  # noqa: E402


def clients(d, ns="py", value_size=1 << 16):
    sock = str(d.data / "kv.sock")
    token = (d.data / "kv.token").read_text()
    return (Client(sock, token_file=str(d.data / "kv.token"), namespace=ns, value_size=value_size),
            Client(f"127.0.0.1:{d.kv_port}", token=token, namespace=ns, value_size=value_size))


def test_put_get_exists_with_buffers(make_daemon):
    d = make_daemon(threads=2)
    u, t = clients(d)
    with u, t:
        assert u.shards == 2 and u.shared_memory and not t.shared_memory
        keys = [f"blk-{i}" for i in range(40)]
        vals = [os.urandom(1000 + 37 * i) for i in range(40)]
        # bytes, bytearray, memoryview and array.array all go in
        kinds = [vals[i] if i % 4 == 0 else bytearray(vals[i]) if i % 4 == 1 else
                 memoryview(vals[i]) if i % 4 == 2 else array.array("B", vals[i]) for i in range(40)]
        assert u.put(keys[:20], kinds[:20]) == [OK] * 20
        assert t.put(keys[20:], kinds[20:]) == [OK] * 20
        assert u.put(keys[:1], [b"again"]) == [EXISTS]
        for c in (u, t):
            outs = [bytearray(2000 + 37 * i) for i in range(40)]
            lens = c.get(keys, outs)
            assert lens == [len(v) for v in vals]
            assert all(bytes(o[:n]) == v for o, n, v in zip(outs, lens, vals))
        present, leading = t.exists(keys[:5] + ["missing"] + keys[5:7])
        assert present == [True] * 5 + [False, True, True] and leading == 5
        small = [bytearray(10)]
        assert u.get(keys[:1], small) == [-TOO_LARGE]
        assert u.get(["nope"], [bytearray(10)]) == [-NOT_FOUND]
        assert u.delete(keys[:2]) == [OK, OK]
        assert u.delete(keys[:1]) == [NOT_FOUND]
        st = u.stats()
        assert st["entries"] == 38 and st["sessions"] >= 4
        assert u.reset() == 38
        assert u.exists(keys)[1] == 0


def test_errors_are_python_exceptions(make_daemon):
    d = make_daemon()
    sock = str(d.data / "kv.sock")
    with pytest.raises(PermissionError):
        Client(sock, token="wrong")
    with pytest.raises(ValueError):
        Client(sock)  # neither token nor token_file
    with pytest.raises(ConnectionError):
        Client(str(d.data / "no.sock"), token="x")
    u, _ = clients(d)
    with pytest.raises(ValueError):
        u.exists([b""])
    with pytest.raises(ValueError):
        u.exists([b"x" * 193])
    with pytest.raises(TypeError):
        u.exists([3])
    with pytest.raises(ValueError):
        u.put([b"a", b"b"], [b"only one"])
    with pytest.raises(BufferError):
        u.get([b"a"], [b"read-only bytes"])  # get needs writable buffers
    u.close()
    with pytest.raises(ValueError):
        u.exists([b"a"])
    u.close()  # twice is fine


def test_threads_share_a_client(make_daemon):
    d = make_daemon(threads=2)
    u, t = clients(d, ns="threads", value_size=1 << 18)
    errors = []

    def work(c, tid):
        try:
            for i in range(60):
                k = f"t{tid}-{i}"
                v = os.urandom(1 << 18)
                assert c.put([k], [v]) == [OK]
                out = bytearray(1 << 18)
                assert c.get([k], [out]) == [len(v)] and out == v
        except Exception as e:  # noqa: BLE001
            errors.append(repr(e))

    ths = [threading.Thread(target=work, args=(c, i)) for i, c in enumerate([u, u, t, t])]
    for th in ths:
        th.start()
    for th in ths:
        th.join(60)
    assert not errors, errors
    u.close()
    t.close()
