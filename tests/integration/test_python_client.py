"""The Python package openlake-vllm (module openlake_client, a C extension
over the C client) against a real two-shard daemon: buffers of every kind
in and out, both transports, namespaces, errors, threads sharing one
client while the GIL is released, and the zero-copy slots (reserve/commit,
acquire/release) with their view rules."""
import array
import errno
import os
import threading
import time

import pytest

from test_kv import poll

openlake_client = pytest.importorskip(
    "openlake_client", reason="pip install . (scripts/deps.sh test does it)")
from openlake_client import (EXISTS, NOT_FOUND, OK, STALE_GENERATION, TOO_LARGE,  # noqa: E402
                             Client, Slot)


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
    # More keys for one shard than the server takes in a frame (max_items
    # 8192): a clear E2BIG, nothing sent, and the client keeps working.
    many = [b"k%06d" % i for i in range(9000)]
    with pytest.raises(OSError) as ei:
        u.exists(many)
    assert ei.value.errno == errno.E2BIG
    with pytest.raises(OSError) as ei:
        u.delete(many)
    assert ei.value.errno == errno.E2BIG
    assert u.exists(many[:8192]) == ([False] * 8192, 0)
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
                if c.shared_memory:  # the slot calls: Unix socket only
                    (s,) = c.acquire([k])
                    assert s.status == OK and s.view == v
                    assert c.release([s]) == [OK]
                    (r,) = c.reserve([k + "-r"], 1000)
                    r.view[:] = v[:1000]
                    assert c.commit([r]) == [OK]
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


def test_reserve_write_commit_then_acquire_read_release(make_daemon):
    xxhash = pytest.importorskip("xxhash")
    d = make_daemon(threads=2)
    u, t = clients(d, ns="slots")
    with u, t:
        keys = [f"slot-{i}" for i in range(12)]
        vals = [os.urandom(3000 + 100 * i) for i in range(12)]
        slots = u.reserve(keys, 5000)
        assert all(isinstance(s, Slot) and s.status == OK and s.held for s in slots)
        assert all(s.len == 5000 and s.capacity >= 5000 and not s.readonly for s in slots)
        for s, v in zip(slots, vals):
            s.view[:len(v)] = v  # straight into the shared slab
        assert u.exists(keys)[1] == 0  # nothing visible before commit
        assert u.commit(slots, [len(v) for v in vals]) == [OK] * 12
        assert all(not s.held and s.len == len(v) and s.checksum == xxhash.xxh3_64_intdigest(v)
                   for s, v in zip(slots, vals))
        assert u.commit(slots) == [STALE_GENERATION] * 12  # once only
        for c in (u, t):
            outs = [bytearray(5000) for _ in keys]
            assert c.get(keys, outs) == [len(v) for v in vals]
            assert all(bytes(o[:len(v)]) == v for o, v in zip(outs, vals))
        # a present key cannot be reserved
        again = u.reserve(keys[:3], 0)
        assert [s.status for s in again] == [EXISTS] * 3 and not any(s.held for s in again)
        with pytest.raises(ValueError):
            again[0].view
        # pinned: read in place, read-only, verified, released
        pins = u.acquire(keys + ["missing"])
        assert [s.status for s in pins] == [OK] * 12 + [NOT_FOUND]
        for s, v in zip(pins, vals):
            assert s.readonly and s.len == len(v) and s.view == v and s.verify()
            with pytest.raises(TypeError):
                s.view[0] = 0
        assert u.stats()["pins"] == 12
        assert u.release(pins) == [OK] * 12 + [STALE_GENERATION]
        assert u.release(pins[:1]) == [STALE_GENERATION]
        assert u.stats()["pins"] == 0
        # too long a length: refused, still reserved; abort gives it back
        (r,) = u.reserve(["aborted"], 0)
        assert u.commit([r], [r.capacity + 1]) == [TOO_LARGE] and r.held
        assert u.abort([r]) == [OK] and not r.held
        assert u.exists(["aborted"])[0] == [False]
        # a Slot dropped while held gives its reservation or pin back
        (r,) = u.reserve(["dropped"], 10)
        del r
        (r,) = u.reserve(["dropped"], 10)
        assert r.status == OK
        r.view[:] = b"0123456789"
        assert u.commit([r]) == [OK]
        (p,) = u.acquire(["dropped"])
        del p
        assert u.stats()["pins"] == 0


def test_numpy_writes_and_reads_the_slab_in_place(make_daemon):
    np = pytest.importorskip("numpy")
    d = make_daemon(threads=2)
    u, t = clients(d, ns="numpy", value_size=1 << 20)
    with u, t:
        src = np.arange(1 << 18, dtype=np.float32)  # 1 MiB
        (s,) = u.reserve(["tensor"], src.nbytes)
        a = np.frombuffer(s.view, dtype=np.float32)
        assert a.flags.writeable and a.size == src.size
        a[:] = src  # the only copy: into shared memory
        with pytest.raises(BufferError):
            u.commit([s])  # the array still points into the slot
        assert s.held
        del a
        assert u.commit([s]) == [OK]
        out = np.zeros_like(src)
        assert t.get(["tensor"], [out]) == [src.nbytes] and (out == src).all()
        (p,) = u.acquire(["tensor"])
        b = np.frombuffer(p.view, dtype=np.float32)
        assert not b.flags.writeable and (b == src).all()
        with pytest.raises(BufferError):
            u.release([p])
        del b
        assert u.release([p]) == [OK]


def test_views_are_unusable_once_the_slot_is_given_back(make_daemon):
    d = make_daemon()
    u, _ = clients(d, ns="views")
    u.put(["k"], [b"value"])
    (p,) = u.acquire(["k"])
    with p.view as v:  # released at the end of the block
        assert bytes(v) == b"value"
    v2 = p.view
    with pytest.raises(BufferError):
        u.release([p])
    with pytest.raises(BufferError):
        u.close()  # the mapping must outlive every view
    v2.release()
    assert u.release([p]) == [OK]
    with pytest.raises(ValueError):
        p.view
    with pytest.raises(BufferError):
        memoryview(p)
    with pytest.raises(ValueError):
        v2[0]  # the released view
    (r,) = u.reserve(["r"], 4)
    u.close()  # a closed client's slots hold nothing
    assert not r.held
    with pytest.raises(ValueError):
        r.view
    with pytest.raises(ValueError):
        u.commit([r])


def test_slot_argument_errors(make_daemon):
    d = make_daemon(threads=2)
    u, _ = clients(d, ns="args")
    other, _ = clients(d, ns="args")
    with u, other:
        (r,) = u.reserve(["x"], 8)
        with pytest.raises(TypeError):
            u.commit([b"not a slot"])
        with pytest.raises(ValueError):
            other.commit([r])  # a slot of another client
        with pytest.raises(ValueError):
            u.commit([r], [1, 2])
        (r2,) = u.reserve(["y"], 8)
        with pytest.raises(ValueError, match="in the list twice"):
            u.commit([r2, r, r2])           # one slot twice: refused before anything is sent
        assert r2.held and r.held            # and both still usable
        assert u.abort([r2]) == [OK]
        # a reservation is not a pin and a pin is not a reservation
        assert u.release([r]) == [STALE_GENERATION] and r.held
        with pytest.raises(ValueError):
            r.verify()
        assert u.abort([r]) == [OK]


def test_slots_held_across_a_restart_are_refused(make_daemon):
    d = make_daemon(threads=2)
    u, _ = clients(d, ns="restart")
    u.put(["p"], [b"pinned bytes"])
    (p,) = u.acquire(["p"])
    pending = u.reserve([f"r{i}" for i in range(4)], 0)  # on both shards
    d.stop()
    d.start()
    deadline = time.time() + 60
    while True:  # each shard finds its connection dead once, then reconnects
        try:
            st = u.commit(pending)
            break
        except OSError as e:
            assert e.errno in (errno.EAGAIN, errno.EIO, errno.ETIMEDOUT), e
            assert time.time() < deadline
            time.sleep(0.02)
    assert st == [STALE_GENERATION] * 4 and not any(s.held for s in pending)
    while True:
        try:
            assert u.release([p]) == [STALE_GENERATION]
            break
        except OSError as e:
            assert e.errno in (errno.EAGAIN, errno.EIO, errno.ETIMEDOUT), e
            assert time.time() < deadline
            time.sleep(0.02)
    assert u.put(["p"], [b"new"]) == [OK]  # the client works on the new daemon
    u.close()


def test_pinned_slot_survives_eviction_pressure(make_daemon):
    d = make_daemon(threads=2)
    u, _ = clients(d, ns="pressure", value_size=1 << 20)
    with u:
        want = os.urandom(1 << 20)
        assert u.put(["pinned"], [want]) == [OK]
        (p,) = u.acquire(["pinned"])
        before = u.stats()["evictions"]
        filler = bytearray(1 << 20)
        for i in range(600):  # the 0.25 GiB slab, more than twice over
            filler[:8] = i.to_bytes(8, "little")
            u.put([f"fill-{i}"], [filler])
        assert u.stats()["evictions"] > before
        assert p.view == want and p.verify()
        assert u.exists(["pinned"])[0] == [True]
        assert u.release([p]) == [OK]


def test_tcp_client_refuses_slot_calls(make_daemon):
    d = make_daemon()
    _, t = clients(d, ns="tcp")
    with t:
        for call in (lambda: t.reserve(["k"], 10), lambda: t.acquire(["k"]),
                     lambda: t.commit([]), lambda: t.release([])):
            with pytest.raises(OSError) as e:
                call()
            assert e.value.errno == errno.EOPNOTSUPP and "Unix socket" in str(e.value)


def _minor_faults():
    with open("/proc/self/stat") as f:
        return int(f.read().rsplit(")", 1)[1].split()[7])


def _get_faults(u, keys, size, populate):
    if populate:
        u.populate()
        u.populate(1 << 20)                            # again, and a prefix: no-ops
    out = [bytearray(size) for _ in keys]              # destinations faulted in first
    for b in out:
        b[::4096] = b"\1" * len(b[::4096])
    before = _minor_faults()
    lens = u.get(keys, out)
    return _minor_faults() - before, lens, out


def test_populate_fills_the_slab_page_tables_ahead(make_daemon):
    d = make_daemon(threads=2)
    src = os.urandom(1 << 20)
    keys = [b"p%d" % i for i in range(32)]
    faults = {}
    for populate in (False, True):
        u, t = clients(d, ns=f"pop{populate}", value_size=1 << 20)
        with u, t:
            assert t.put(keys, [src] * 32) == [OK] * 32   # over TCP: not mapped by u yet
            faults[populate], lens, out = _get_faults(u, keys, 1 << 20, populate)
            assert lens == [1 << 20] * 32 and all(bytes(b) == src for b in out)
            if populate:
                with pytest.raises(OSError) as e:
                    t.populate()
                assert e.value.errno == errno.EOPNOTSUPP
    # Reading 32 MiB of slab: the first touch of each piece faults without populate().
    assert faults[True] * 2 < faults[False], faults


def _stamped(n, size, salt):
    """n distinct values of size bytes (random head, stamped index)."""
    base = os.urandom(size)
    out = []
    for i in range(n):
        v = bytearray(base)
        v[:16] = f"{salt}-{i:08d}".encode()[:16].ljust(16, b".")
        v[-8:] = i.to_bytes(8, "little")
        out.append(v)
    return out


@pytest.mark.parametrize("n,size", [(32, 1 << 20), (40, 2 << 20)])
def test_tcp_batches_past_max_data_body_round_trip(make_daemon, n, size):
    # The server takes at most max_data_body (16 MiB) per PUT request and of
    # values per GET answer; the client splits and pipelines the frames.
    d = make_daemon(threads=2)
    token = (d.data / "kv.token").read_text()
    with Client(f"127.0.0.1:{d.kv_port}", token=token, namespace=f"big{n}", value_size=size) as t:
        keys = [f"big-{n}-{i}" for i in range(n)]
        vals = _stamped(n, size, n)
        assert t.put(keys, vals) == [OK] * n
        outs = [bytearray(size) for _ in range(n)]
        assert t.get(keys, outs) == [size] * n
        assert all(o == v for o, v in zip(outs, vals))
        # a client that expects small values (value_size 64 KiB) sizes its
        # GET frames too small: the server answers TOO_LARGE for what does
        # not fit and the client asks again
        with Client(f"127.0.0.1:{d.kv_port}", token=token, namespace=f"big{n}") as small:
            outs = [bytearray(size) for _ in range(n)]
            assert small.get(keys, outs) == [size] * n
            assert all(o == v for o, v in zip(outs, vals))
        assert t.stats()["pins"] == 0


def test_tcp_value_over_max_data_body_is_too_large(make_daemon):
    d = make_daemon(args=["--kv-slab.capacity-gb", "0.5"], threads=2)
    u, _ = clients(d, ns="huge", value_size=32 << 20)
    token = (d.data / "kv.token").read_text()
    t = Client(f"127.0.0.1:{d.kv_port}", token=token, namespace="huge", value_size=32 << 20)
    with u, t:
        huge = os.urandom(20 << 20)  # over max_data_body (16 MiB)
        small = os.urandom(1 << 20)
        # PUT: refused without being sent, its neighbours stored
        assert t.put(["a", "too-big", "b"], [small, huge, small]) == [OK, TOO_LARGE, OK]
        assert t.exists(["too-big"])[0] == [False]
        # GET: a value stored over the Unix socket cannot come back inline
        assert u.put(["huge"], [huge]) == [OK]
        outs = [bytearray(20 << 20) for _ in range(3)]
        assert t.get(["a", "huge", "b"], outs) == [1 << 20, -TOO_LARGE, 1 << 20]
        assert bytes(outs[0][:1 << 20]) == small and bytes(outs[2][:1 << 20]) == small
        assert t.get(["huge"], outs[:1]) == [-TOO_LARGE]
        assert u.get(["huge"], outs[:1]) == [20 << 20]
        assert t.stats()["pins"] == 0


def test_client_waits_for_a_daemon_that_is_starting(make_daemon):
    """Client() goes through ol_client_open: a HELLO answered BUSY "starting;
    retry" is said again within timeout_ms (held not ready here, as while
    the daemon starts), then ConnectionError."""
    d = make_daemon(threads=2, args=["--http.debug-endpoints", "true"])
    sock, tf = str(d.data / "kv.sock"), str(d.data / "kv.token")
    d.hold_ready()
    with pytest.raises(ConnectionError, match="BUSY"):
        Client(sock, token_file=tf, timeout_ms=300)
    n = d.hello_busy()
    assert n >= 2, "no HELLO said again before the timeout"
    got, errs = [], []

    def connect():
        try:
            got.append(Client(sock, token_file=tf, namespace="busy", timeout_ms=120000))
        except Exception as e:  # noqa: BLE001 - reported below
            errs.append(e)

    t = threading.Thread(target=connect)
    t.start()
    assert poll(lambda: d.hello_busy() >= n + 2 or not t.is_alive(), 60)
    assert t.is_alive(), errs
    d.hold_ready(False)
    t.join(60)
    assert got and not errs, errs
    with got[0] as c:
        assert c.shards == 2 and c.stats()["sessions"] >= 2


def _members_server(addrs):
    """A KV server on loopback that breaks the protocol in one way only: it
    answers HELLO (version 2) and then MEMBERS with the members addrs
    (id i + 1, each a byte string sent as it is). The frames are the
    protocol's (kvwire), headers and CRCs right. Returns (port, thread)."""
    import socket
    import struct
    import kvwire
    ls = socket.socket()
    ls.bind(("127.0.0.1", 0))
    ls.listen(1)
    ls.settimeout(10)

    def read_frame(s):
        hdr = b""
        while len(hdr) < kvwire.HDR_LEN:
            got = s.recv(kvwire.HDR_LEN - len(hdr))
            if not got:
                return None
            hdr += got
        _, _, op, req_id, body_len, _, _, _ = kvwire.HDR.unpack_from(hdr)
        body = b""
        while len(body) < body_len:
            body += s.recv(body_len - len(body))
        return op, req_id

    def answer(op, req_id, body, count, version):
        body += struct.pack("<II", kvwire.crc32c(body), 0)
        return kvwire.header(op, req_id, len(body), count, flags=kvwire.F_RESPONSE |
                             kvwire.F_BODY_CRC, version=version) + body

    def serve():
        try:
            s, _ = ls.accept()
        except OSError:
            return
        with s:
            s.settimeout(10)
            while (f := read_frame(s)) is not None:
                op, req_id = f
                if op == kvwire.Op.HELLO:
                    body = kvwire.HELLO_RESP.pack(1, 2, 0, 1, 0, 0, 0, 0, 64, 1 << 20,
                                                  1 << 20, 1 << 20, 192, 0)
                    s.sendall(answer(op, req_id, body, 0, 1))
                else:   # MEMBERS
                    body = struct.pack("<qH6x", 7, 1)
                    for i, a in enumerate(addrs):
                        body += kvwire.pad8(struct.pack("<qQH", i + 1, 1 << 30, len(a)) + a)
                    s.sendall(answer(op, req_id, body, len(addrs), 2))
        ls.close()

    t = threading.Thread(target=serve, daemon=True)
    t.start()
    return ls.getsockname()[1], t


def test_members_with_an_address_that_is_not_utf8_is_a_protocol_error():
    """A kv_addr that is not UTF-8 (bytes no conforming node sends: records
    are JSON) raises OSError(EPROTO) naming the member and its bytes, not a
    UnicodeDecodeError; one with a NUL (it would cut the C string) too; a
    UTF-8 one that is not ASCII is taken as it is."""
    port, t = _members_server([b"127.0.0.1:9400", "gpü-2:9400".encode()])
    with Client(f"127.0.0.1:{port}", token="x", namespace="ns") as c:
        assert c.members() == (7, 1, [(1, 1 << 30, "127.0.0.1:9400"),
                                      (2, 1 << 30, "gpü-2:9400")])
    t.join(10)
    port, t = _members_server([b"127.0.0.1:9400", b"gpu-\xff\xfe:9400"])
    with Client(f"127.0.0.1:{port}", token="x", namespace="ns") as c:
        with pytest.raises(OSError) as e:
            c.members()
        assert e.value.errno == errno.EPROTO
        assert str(e.value).endswith("members: the server sent node 2's kv_addr as "
                                     "b'gpu-\\xff\\xfe:9400', which is not UTF-8 (a server "
                                     "that breaks the KV protocol)"), str(e.value)
    t.join(10)
    port, t = _members_server([b"127.0.0.1:9400\x00evil"])
    with Client(f"127.0.0.1:{port}", token="x", namespace="ns") as c:
        with pytest.raises(OSError) as e:
            c.members()
        assert e.value.errno == errno.EPROTO
    t.join(10)
