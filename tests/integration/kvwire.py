"""A small, strict, pure-Python client of the openlaked KV wire protocol, for
the integration tests only (docs/kv-protocol.md, docs/kv-slab.md).

Strict means: every response is checked byte by byte against the spec
(magic, version, header CRC, RESPONSE flag, request id and opcode echo, body
length for the opcode and count, zero padding and reserved fields, LOOKUP
leading run against its bitmap, optional body CRC). A deviation raises
ProtocolViolation carrying the bytes sent and received, so a failing test
names the exact frame.

Pieces:
  crc32c, key_hash, shard_of      checksums and the key -> shard rule
  encode_* / decode_*             bodies, item by item, per the doc's tables
  frame()                         header (+ optional body CRC trailer) + body
  KvConn                          one connection (TCP or Unix), HELLO, requests,
                                  pipelining, the slab mapping (SCM_RIGHTS)
  Slab                            the mapped slab: superblock, slot headers,
                                  seqlock-checked reads
  KvClient                        one KvConn per shard, keys routed by hash
"""
import collections
import enum
import mmap
import os
import socket
import struct
import time

import xxhash

# ---- constants -------------------------------------------------------------------------

MAGIC = b"OLKV"
VERSION = 1
HDR_LEN = 32
F_RESPONSE = 0x0001
F_BODY_CRC = 0x0002
HELLO_WANTS_SHM = 0x1
HELLO_SHARD = 0x2
HELLO_SHM = 0x1

MAX_BODY = 16 << 20
MAX_ITEMS = 65536
MAX_KEY = 192


class Op(enum.IntEnum):
    HELLO = 1
    RESERVE = 2
    COMMIT = 3
    ABORT = 4
    LOOKUP = 5
    ACQUIRE = 6
    RELEASE = 7
    DELETE = 8
    RESET = 9
    STATS = 10
    PUT = 11
    GET = 12
    ERROR = 13


class St(enum.IntEnum):
    OK = 0
    EXISTS = 1
    NOT_FOUND = 2
    NOSPACE = 3
    BUSY = 4
    PINNED = 5
    STALE_GENERATION = 6
    TOO_LARGE = 7
    BAD_REQUEST = 8
    UNAUTHORIZED = 9
    UNSUPPORTED_VERSION = 10
    QUOTA = 11
    CHECKSUM_MISMATCH = 12
    UNSUPPORTED = 13
    SHUTTING_DOWN = 14
    INTERNAL = 15
    WRONG_SHARD = 16


def st_name(s):
    try:
        return St(s).name
    except ValueError:
        return f"UNKNOWN({s})"


STAT_NAMES = ("entries", "bytes_used", "bytes_capacity", "slots_total", "slots_free", "hits",
              "misses", "evictions", "reservations", "commits", "aborts", "pins", "acquires",
              "deletes", "disk_entries", "disk_bytes", "sessions", "protocol_errors")

SUPER_MAGIC = 0x424C534B   # "KSLB"
SLOT_MAGIC = 0x534B4C4F    # "OLKS"
SLOT_HDR_SIZE = 256
SLOT_COMMITTED = 1

# ---- checksums and hashing ---------------------------------------------------------------


def _crc_table():
    table = []
    for i in range(256):
        c = i
        for _ in range(8):
            c = (c >> 1) ^ (0x82F63B78 if c & 1 else 0)
        table.append(c)
    return tuple(table)


_CRC_TABLE = _crc_table()


def crc32c(data, crc=0):
    """Standard CRC-32C (init and final XOR 0xFFFFFFFF), chaining like zlib."""
    t = _CRC_TABLE
    crc ^= 0xFFFFFFFF
    for b in bytes(data):
        crc = t[(crc ^ b) & 0xFF] ^ (crc >> 8)
    return crc ^ 0xFFFFFFFF


assert crc32c(b"123456789") == 0xE3069283


def xxh3(data):
    return xxhash.xxh3_64_intdigest(bytes(data))


def key_hash(ns, key):
    """XXH3-128(key, seed = XXH3-64(namespace)) as (lo, hi)."""
    h = xxhash.xxh3_128_intdigest(bytes(key), seed=xxhash.xxh3_64_intdigest(bytes(ns)))
    return h & ((1 << 64) - 1), h >> 64


def ns_id(ns):
    """The namespace id in slot headers: low 32 bits of XXH3-64(namespace)."""
    return xxhash.xxh3_64_intdigest(bytes(ns)) & 0xFFFFFFFF


def shard_of(ns, key, shards):
    return key_hash(ns, key)[1] % shards


# ---- errors ------------------------------------------------------------------------------


class ProtocolViolation(AssertionError):
    """The server sent something the spec forbids."""


class KvError(Exception):
    """A response with a non-OK frame status (status, message)."""

    def __init__(self, op, status, message):
        super().__init__(f"{Op(op).name if op in Op._value2member_map_ else op}: "
                         f"{st_name(status)}: {message!r}")
        self.op = op
        self.status = status
        self.message = message


def hexdump(b, limit=256):
    b = bytes(b)
    out = []
    for i in range(0, min(len(b), limit), 16):
        out.append(f"{i:04x}: " + " ".join(f"{x:02x}" for x in b[i:i + 16]))
    if len(b) > limit:
        out.append(f"... ({len(b)} bytes)")
    return "\n".join(out)


# ---- encoding ----------------------------------------------------------------------------

HDR = struct.Struct("<4sHHQIIHH")   # first 28 bytes; the CRC follows


def pad8(b):
    return bytes(b) + b"\0" * (-len(b) % 8)


def align8(n):
    return (n + 7) & ~7


def header(op, req_id, body_len, count, status=0, flags=0, version=VERSION, magic=MAGIC,
           crc=None):
    h = HDR.pack(magic, version, op, req_id, body_len, count, status, flags)
    return h + struct.pack("<I", crc32c(h) if crc is None else crc)


def frame(op, req_id, body=b"", count=0, flags=0, body_crc=False, **hdr_kw):
    """A request frame. body_crc appends the trailer and sets BODY_CRC."""
    body = bytes(body)
    if body_crc:
        body += struct.pack("<II", crc32c(body), 0)
        flags |= F_BODY_CRC
    return header(op, req_id, len(body), count, flags=flags, **hdr_kw) + body


def encode_keys(keys):
    return b"".join(pad8(struct.pack("<H", len(k)) + bytes(k)) for k in keys)


def encode_hello(token=b"", ns=b"default", value_size=0, flags=0, shard=0, min_version=1,
                 max_version=1):
    token, ns = _b(token), _b(ns)
    return pad8(struct.pack("<HHIQHHI", min_version, max_version, flags, value_size,
                            len(token), len(ns), shard) + token + ns)


def encode_commit(items):
    """items: (slot, gen, value_len, checksum)."""
    return b"".join(struct.pack("<IIQQQ", s, 0, g, n, c) for s, g, n, c in items)


def encode_refs(refs):
    """refs: (slot, gen)."""
    return b"".join(struct.pack("<IIQ", s, 0, g) for s, g in refs)


def encode_put(items):
    """items: (key, value) or (key, value, checksum)."""
    out = []
    for it in items:
        key, value = bytes(it[0]), bytes(it[1])
        csum = it[2] if len(it) > 2 else xxh3(value)
        out.append(struct.pack("<QQ", len(value), csum) + pad8(struct.pack("<H", len(key)) + key)
                   + pad8(value))
    return b"".join(out)


def _b(x):
    return x.encode() if isinstance(x, str) else bytes(x)


# ---- decoding (strict) --------------------------------------------------------------------

Frame = collections.namedtuple("Frame", "op req_id status flags count body raw")
Reserved = collections.namedtuple("Reserved", "status slot gen offset")
Acquired = collections.namedtuple("Acquired", "status slot gen offset value_len checksum")
Lookup = collections.namedtuple("Lookup", "leading present")
GetRes = collections.namedtuple("GetRes", "status value checksum")


def _need(cond, what, raw):
    if not cond:
        raise ProtocolViolation(f"{what}\nframe received:\n{hexdump(raw)}")


def decode_message(body, raw=b""):
    _need(len(body) >= 8, "message body shorter than 8 bytes", raw)
    (n,) = struct.unpack_from("<H", body)
    _need(n <= 1024 and len(body) == align8(2 + n),
          f"message body_len {len(body)} does not fit msg_len {n}", raw)
    _need(not any(body[2 + n:]), "nonzero padding after message", raw)
    return bytes(body[2:2 + n]).decode("utf-8", "replace")


HELLO_RESP = struct.Struct("<QHHIQQQIIIIIHH")
HELLO_FIELDS = ("session_id", "version", "flags", "shards", "slab_size", "slot_size",
                "value_offset", "slot_count", "max_items", "max_body", "max_data_body",
                "max_value", "max_key", "reserved")


def decode_hello(body, raw=b""):
    _need(len(body) == 64, f"HELLO response body is {len(body)} bytes, not 64", raw)
    d = dict(zip(HELLO_FIELDS, HELLO_RESP.unpack(body)))
    _need(d.pop("reserved") == 0, "HELLO response reserved field nonzero", raw)
    _need(d["flags"] & ~HELLO_SHM == 0, f"unknown HELLO response flags {d['flags']:#x}", raw)
    _need(d["version"] == 1, f"negotiated version {d['version']} outside 1..1", raw)
    _need(d["shards"] >= 1, "HELLO response says 0 shards", raw)
    _need(1 <= d["max_items"] <= MAX_ITEMS, f"max_items {d['max_items']}", raw)
    _need(1 <= d["max_body"] <= MAX_BODY, f"max_body {d['max_body']}", raw)
    _need(1 <= d["max_data_body"] <= 1 << 30, f"max_data_body {d['max_data_body']}", raw)
    _need(1 <= d["max_value"] <= 256 << 20, f"max_value {d['max_value']}", raw)
    _need(1 <= d["max_key"] <= MAX_KEY, f"max_key {d['max_key']}", raw)
    if d["flags"] & HELLO_SHM:
        _need(d["value_offset"] < d["slot_size"], "value_offset >= slot_size", raw)
        _need(d["slot_count"] * d["slot_size"] <= d["slab_size"],
              "slot_count x slot_size > slab_size", raw)
    else:
        _need(d["slab_size"] == d["slot_size"] == d["value_offset"] == d["slot_count"] == 0,
              "slab fields nonzero without SHM", raw)
    return d


def decode_reserve(body, count, raw=b""):
    _need(len(body) == 24 * count, f"RESERVE body {len(body)} bytes for {count} items", raw)
    out = []
    for i in range(count):
        st, rsv, slot, gen, off = struct.unpack_from("<HHIQQ", body, 24 * i)
        _need(rsv == 0, f"RESERVE item {i}: reserved field nonzero", raw)
        _need(st in St._value2member_map_, f"RESERVE item {i}: unknown status {st}", raw)
        if st != St.OK:
            _need(slot == gen == off == 0, f"RESERVE item {i}: {st_name(st)} with nonzero "
                  "fields", raw)
        out.append(Reserved(st, slot, gen, off))
    return out


def decode_statuses(body, count, raw=b""):
    _need(len(body) == align8(2 * count), f"status list {len(body)} bytes for {count}", raw)
    sts = list(struct.unpack_from(f"<{count}H", body)) if count else []
    _need(not any(body[2 * count:]), "nonzero padding after status list", raw)
    for i, st in enumerate(sts):
        _need(st in St._value2member_map_, f"item {i}: unknown status {st}", raw)
    return sts


def decode_lookup(body, count, raw=b""):
    nb = (count + 7) // 8
    _need(len(body) == align8(8 + nb), f"LOOKUP body {len(body)} bytes for {count} keys", raw)
    leading, rsv = struct.unpack_from("<II", body)
    _need(rsv == 0, "LOOKUP reserved field nonzero", raw)
    bm = body[8:8 + nb]
    present = [bool((bm[i >> 3] >> (i & 7)) & 1) for i in range(count)]
    if count % 8:
        _need(bm[-1] >> (count % 8) == 0, "LOOKUP bitmap bits past count set", raw)
    _need(not any(body[8 + nb:]), "LOOKUP nonzero padding", raw)
    run = 0
    while run < count and present[run]:
        run += 1
    _need(leading == run, f"LOOKUP leading {leading} disagrees with bitmap (run {run})", raw)
    return Lookup(leading, present)


def decode_acquire(body, count, raw=b""):
    _need(len(body) == 40 * count, f"ACQUIRE body {len(body)} bytes for {count} items", raw)
    out = []
    for i in range(count):
        st, rsv, slot, gen, off, n, c = struct.unpack_from("<HHIQQQQ", body, 40 * i)
        _need(rsv == 0, f"ACQUIRE item {i}: reserved field nonzero", raw)
        _need(st in St._value2member_map_, f"ACQUIRE item {i}: unknown status {st}", raw)
        if st != St.OK:
            _need(slot == gen == off == n == c == 0,
                  f"ACQUIRE item {i}: {st_name(st)} with nonzero fields", raw)
        out.append(Acquired(st, slot, gen, off, n, c))
    return out


def decode_get(body, count, raw=b""):
    out, off = [], 0
    for i in range(count):
        _need(off + 24 <= len(body), f"GET item {i} past the body end", raw)
        st, r1, r2, n, c = struct.unpack_from("<HHIQQ", body, off)
        _need(r1 == r2 == 0, f"GET item {i}: reserved nonzero", raw)
        end = off + 24 + align8(n)
        _need(end <= len(body), f"GET item {i} value past the body end", raw)
        value = bytes(body[off + 24:off + 24 + n])
        _need(not any(body[off + 24 + n:end]), f"GET item {i}: nonzero padding", raw)
        out.append(GetRes(st, value if st == St.OK else None, c))
        off = end
    _need(off == len(body), "GET body has trailing bytes", raw)
    return out


def decode_u64s(body, n, what, raw=b""):
    _need(len(body) == 8 * n, f"{what} body is {len(body)} bytes, not {8 * n}", raw)
    return struct.unpack(f"<{n}Q", body)


def decode_ok_body(op, body, count, raw=b""):
    if op == Op.HELLO:
        return decode_hello(body, raw)
    if op == Op.RESERVE:
        return decode_reserve(body, count, raw)
    if op in (Op.COMMIT, Op.ABORT, Op.RELEASE, Op.DELETE, Op.PUT):
        return decode_statuses(body, count, raw)
    if op == Op.LOOKUP:
        return decode_lookup(body, count, raw)
    if op == Op.ACQUIRE:
        return decode_acquire(body, count, raw)
    if op == Op.RESET:
        return decode_u64s(body, 1, "RESET", raw)[0]
    if op == Op.STATS:
        return dict(zip(STAT_NAMES, decode_u64s(body, 18, "STATS", raw)))
    if op == Op.GET:
        return decode_get(body, count, raw)
    raise ProtocolViolation(f"OK response for opcode {op}\n{hexdump(raw)}")


def encode_items(op, items):
    """Body and count of a request of opcode op from Python items."""
    items = list(items or ())
    if op in (Op.RESERVE, Op.LOOKUP, Op.ACQUIRE, Op.DELETE, Op.GET):
        return encode_keys(items), len(items)
    if op == Op.COMMIT:
        return encode_commit(items), len(items)
    if op in (Op.ABORT, Op.RELEASE):
        return encode_refs(items), len(items)
    if op == Op.PUT:
        return encode_put(items), len(items)
    if op in (Op.RESET, Op.STATS):
        return b"", 0
    raise ValueError(f"no item encoding for opcode {op}")


# ---- the slab ----------------------------------------------------------------------------

SUPER = struct.Struct("<IHHQQQIIII")
SLOT_HDR = struct.Struct("<IHHQQQIIQQII")   # 64 bytes, then 192 key bytes
SLOT_FIELDS = ("magic", "version", "key_len", "gen", "value_len", "value_sum", "ns", "flags",
               "hash_lo", "hash_hi", "hdr_crc", "reserved")


class Slab:
    """A client's mapping of the daemon's slab (docs/kv-slab.md)."""

    def __init__(self, fd, size):
        self.map = mmap.mmap(fd, size, flags=mmap.MAP_SHARED,
                             prot=mmap.PROT_READ | mmap.PROT_WRITE)
        self.size = size
        (magic, version, rsv, rsize, self.hdr_off, self.data_off, self.npages, page_size,
         hdr_size, per_page) = SUPER.unpack_from(self.map, 0)
        assert magic == SUPER_MAGIC, f"slab superblock magic {magic:#x}"
        assert version == 1 and rsv == 0, f"slab superblock version {version} reserved {rsv}"
        assert rsize == size, f"superblock size {rsize} != slab_size {size} from HELLO"
        assert page_size == 2 << 20 and hdr_size == 256 and per_page == 128, \
            (page_size, hdr_size, per_page)
        assert self.data_off % (2 << 20) == 0, f"data_off {self.data_off:#x} not 2 MiB aligned"
        assert self.data_off + self.npages * page_size <= size, "data pages past the region"

    def close(self):
        self.map.close()

    def write(self, offset, data):
        assert self.data_off <= offset and offset + len(data) <= self.size, \
            f"write [{offset}, +{len(data)}) outside the data pages"
        self.map[offset:offset + len(data)] = data

    def read(self, offset, n):
        return bytes(self.map[offset:offset + n])

    def slot_header(self, slot):
        off = self.hdr_off + SLOT_HDR_SIZE * slot
        raw = bytes(self.map[off:off + SLOT_HDR_SIZE])
        d = dict(zip(SLOT_FIELDS, SLOT_HDR.unpack_from(raw)))
        d["key"] = raw[64:64 + min(d["key_len"], MAX_KEY)]
        d["raw"] = raw
        return d

    @staticmethod
    def header_crc(raw, key_len):
        return crc32c(raw[64:64 + key_len], crc32c(raw[:56]))

    def gen_of(self, slot):
        return struct.unpack_from("<Q", self.map, self.hdr_off + SLOT_HDR_SIZE * slot + 8)[0]

    def read_checked(self, acq, ns=None, key=None):
        """Seqlock read of an acquired entry: header copy, value copy, generation
        re-read; checks everything docs/kv-slab.md lets a reader check. Returns
        the value bytes; raises AssertionError with the details otherwise."""
        hdr = self.slot_header(acq.slot)
        value = self.read(acq.offset, acq.value_len)
        gen_after = self.gen_of(acq.slot)
        where = f"slot {acq.slot} granted gen {acq.gen}: header {_short(hdr)}"
        assert hdr["magic"] == SLOT_MAGIC, f"slot magic {hdr['magic']:#x}; {where}"
        assert hdr["version"] == 1 and hdr["reserved"] == 0, where
        assert hdr["gen"] % 2 == 0, f"odd generation in a pinned slot; {where}"
        assert hdr["gen"] == gen_after == acq.gen, \
            f"generation changed/mismatch (after read {gen_after}); {where}"
        assert hdr["key_len"] <= MAX_KEY, where
        crc = self.header_crc(hdr["raw"], hdr["key_len"])
        assert crc == hdr["hdr_crc"], f"slot header CRC {crc:#x} != stored; {where}"
        assert hdr["flags"] == SLOT_COMMITTED, f"slot not flagged committed; {where}"
        assert hdr["value_len"] == acq.value_len, f"value_len differs from ACQUIRE; {where}"
        assert hdr["value_sum"] == acq.checksum, f"value_sum differs from ACQUIRE; {where}"
        if key is not None:
            assert hdr["key"] == bytes(key), f"slot key {hdr['key']!r} != {bytes(key)!r}"
            if ns is not None:
                lo, hi = key_hash(ns, key)
                assert (hdr["hash_lo"], hdr["hash_hi"]) == (lo, hi), \
                    f"slot key hash differs from XXH3-128(key, seed=XXH3-64(ns)); {where}"
                assert hdr["ns"] == ns_id(ns), \
                    f"slot namespace id != low 32 bits of XXH3-64(ns) {ns_id(ns):#x}; {where}"
        got = xxh3(value)
        assert got == acq.checksum, f"value xxh3 {got:#x} != committed {acq.checksum:#x}; {where}"
        return value


def _short(hdr):
    return {k: (hex(v) if isinstance(v, int) else v) for k, v in hdr.items() if k != "raw"}


# ---- one connection ------------------------------------------------------------------------


class KvConn:
    """One connection. addr: (host, port) for TCP, a path (str) for the Unix socket."""

    def __init__(self, addr, timeout=10):
        if isinstance(addr, (str, bytes, os.PathLike)):
            self.unix = True
            self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            self.sock.settimeout(timeout)
            self.sock.connect(os.fspath(addr))
        else:
            self.unix = False
            self.sock = socket.create_connection(addr, timeout=timeout)
            self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.addr = addr
        self.buf = bytearray()
        self.fds = []           # descriptors received and not yet claimed
        self.eof = False
        self.next_id = 1
        self.info = None        # the HELLO response
        self.slab = None
        self.ns = None
        self.sent = []          # (req_id, bytes) of frames sent and not yet answered

    # -- plumbing
    def close(self, reset=False):
        if reset and not self.unix:
            self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, b"\x01\0\0\0\0\0\0\0")
        self.sock.close()
        for fd in self.fds:
            os.close(fd)
        self.fds = []
        if self.slab:
            try:
                self.slab.close()
            except BufferError:
                pass
            self.slab = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def send_raw(self, data):
        self.sock.sendall(data)

    def _fill(self):
        if self.eof:
            raise EOFError("connection closed by the server")
        if self.unix:
            data, fds, _, _ = socket.recv_fds(self.sock, 1 << 20, 8)
            self.fds.extend(fds)
        else:
            data = self.sock.recv(1 << 20)
        if not data:
            self.eof = True
            raise EOFError("connection closed by the server")
        self.buf += data

    def _need_bytes(self, n):
        while len(self.buf) < n:
            self._fill()

    def read_frame(self):
        """One server frame, header and body CRC checked, trailer stripped."""
        self._need_bytes(HDR_LEN)
        raw_hdr = bytes(self.buf[:HDR_LEN])
        magic, version, op, req_id, body_len, count, status, flags = HDR.unpack_from(raw_hdr)
        (crc,) = struct.unpack_from("<I", raw_hdr, 28)
        _need(magic == MAGIC, "bad magic from the server", raw_hdr)
        _need(version == VERSION, f"frame version {version} from the server", raw_hdr)
        _need(crc == crc32c(raw_hdr[:28]), "bad header CRC from the server", raw_hdr)
        _need(flags & F_RESPONSE, "server frame without the RESPONSE flag", raw_hdr)
        _need(flags & ~(F_RESPONSE | F_BODY_CRC) == 0, f"unknown flags {flags:#x}", raw_hdr)
        _need(body_len % 8 == 0, f"body_len {body_len} not a multiple of 8", raw_hdr)
        _need(op in Op._value2member_map_, f"unknown opcode {op}", raw_hdr)
        _need(status in St._value2member_map_, f"unknown status {status}", raw_hdr)
        _need(not (op == Op.ERROR and status == St.OK), "ERROR frame with status OK", raw_hdr)
        limit = (1 << 30) if op == Op.GET else MAX_BODY
        _need(body_len <= limit, f"body_len {body_len} over the limit", raw_hdr)
        self._need_bytes(HDR_LEN + body_len)
        raw = bytes(self.buf[:HDR_LEN + body_len])
        del self.buf[:HDR_LEN + body_len]
        body = raw[HDR_LEN:]
        if flags & F_BODY_CRC:
            _need(body_len >= 8, "BODY_CRC with a body under 8 bytes", raw)
            bcrc, rsv = struct.unpack_from("<II", body, body_len - 8)
            body = body[:-8]
            _need(rsv == 0 and bcrc == crc32c(body), "bad body CRC trailer", raw)
        if status != St.OK:
            _need(count == 0, f"non-OK frame ({st_name(status)}) with count {count}", raw)
        return Frame(op, req_id, status, flags, count, body, raw)

    def expect_closed(self, timeout=5):
        """Asserts the server closes the connection without sending more bytes."""
        self.sock.settimeout(timeout)
        try:
            while True:
                self._fill()
        except EOFError:
            pass
        except ConnectionResetError:
            self.eof = True
        except socket.timeout:
            raise AssertionError(f"server did not close within {timeout}s")
        assert not self.buf, f"bytes after the last frame before close:\n{hexdump(self.buf)}"

    # -- frames
    def send_frame(self, op, body=b"", count=0, body_crc=False, req_id=None, flags=0):
        if req_id is None:
            req_id = self.next_id
            self.next_id += 1
        data = frame(op, req_id, body, count, flags=flags, body_crc=body_crc)
        self.sent.append((req_id, op, count, data))
        self.send_raw(data)
        return req_id

    def read_response(self):
        """Reads the answer to the oldest unanswered frame: (status, result)."""
        req_id, op, count, sent = self.sent.pop(0)
        f = self.read_frame()
        ctx = f"request sent:\n{hexdump(sent)}\nresponse:\n{hexdump(f.raw)}"
        if f.op == Op.ERROR:
            raise KvError(f.op, f.status, decode_message(f.body, f.raw) + "\n" + ctx)
        if f.op != op or f.req_id != req_id:
            raise ProtocolViolation(f"response op {f.op} id {f.req_id} for op {op} id {req_id}"
                                    f"\n{ctx}")
        if f.status != St.OK:
            return f.status, decode_message(f.body, f.raw)
        if op != Op.HELLO and f.count != count:
            raise ProtocolViolation(f"response count {f.count} for {count} items\n{ctx}")
        return St.OK, decode_ok_body(op, f.body, f.count, f.raw)

    def request(self, op, items=None, body_crc=False):
        """One request: (frame status, results or message)."""
        body, count = encode_items(op, items)
        self.send_frame(op, body, count, body_crc=body_crc)
        return self.read_response()

    def pipeline(self, reqs, body_crc=False):
        """reqs: [(op, items)]. Sends every frame in one write, then reads every
        response in order."""
        data = []
        for op, items in reqs:
            body, count = encode_items(op, items)
            req_id = self.next_id
            self.next_id += 1
            f = frame(op, req_id, body, count, body_crc=body_crc)
            self.sent.append((req_id, op, count, f))
            data.append(f)
        self.send_raw(b"".join(data))
        return [self.read_response() for _ in reqs]

    def ok(self, op, items=None, body_crc=False):
        """request() that insists on a frame status of OK; returns the results."""
        st, res = self.request(op, items, body_crc)
        if st != St.OK:
            raise KvError(op, st, res)
        return res

    # -- operations
    def hello(self, token=b"", ns=b"default", value_size=0, shard=None, shm=False,
              min_version=1, max_version=1):
        """Opens the session. Returns the HELLO response fields as a dict (with
        'slab' when the slab was mapped). A non-OK status raises KvError."""
        flags = (HELLO_WANTS_SHM if shm else 0) | (HELLO_SHARD if shard is not None else 0)
        body = encode_hello(token, ns, value_size, flags, shard or 0, min_version, max_version)
        self.send_frame(Op.HELLO, body, 0)
        st, res = self.read_response()
        if st != St.OK:
            raise KvError(Op.HELLO, st, res)
        if res["flags"] & HELLO_SHM:
            assert shm, "SHM granted without WANTS_SHM"
            assert len(self.fds) == 1, f"HELLO with SHM carried {len(self.fds)} descriptors"
            fd = self.fds.pop()
            try:
                self.slab = Slab(fd, res["slab_size"])
            finally:
                os.close(fd)
            res["slab"] = self.slab
        else:
            assert not self.fds, f"descriptors without the SHM flag: {self.fds}"
        self.info = res
        self.ns = _b(ns)
        return res

    def reserve(self, keys):
        return self.ok(Op.RESERVE, keys)

    def commit(self, items):
        return self.ok(Op.COMMIT, items)

    def abort(self, refs):
        return self.ok(Op.ABORT, refs)

    def lookup(self, keys):
        return self.ok(Op.LOOKUP, keys)

    def acquire(self, keys):
        return self.ok(Op.ACQUIRE, keys)

    def release(self, refs):
        return self.ok(Op.RELEASE, refs)

    def delete(self, keys):
        return self.ok(Op.DELETE, keys)

    def reset(self):
        return self.ok(Op.RESET)

    def stats(self):
        return self.ok(Op.STATS)

    # -- the put/get path over the slab
    def put(self, pairs):
        """Reserve, write into the slab, commit. Returns per key the RESERVE
        status when not OK, else the COMMIT status."""
        keys = [k for k, _ in pairs]
        res = self.reserve(keys)
        commits, where = [], []
        for i, ((k, v), r) in enumerate(zip(pairs, res)):
            if r.status == St.OK:
                self.slab.write(r.offset, v)
                commits.append((r.slot, r.gen, len(v), xxh3(v)))
                where.append(i)
        out = [r.status for r in res]
        if commits:
            for i, st in zip(where, self.commit(commits)):
                out[i] = st
        return out

    def get(self, keys, ns=None):
        """Acquire, read with every check, release. Values (None: not found)."""
        acq = self.acquire(keys)
        out = []
        try:
            for k, a in zip(keys, acq):
                out.append(self.slab.read_checked(a, ns or self.ns, k)
                           if a.status == St.OK else None)
        finally:
            refs = [(a.slot, a.gen) for a in acq if a.status == St.OK]
            if refs:
                sts = self.release(refs)
                assert all(s == St.OK for s in sts), f"RELEASE statuses {sts}"
        return out


# ---- one connection per shard ---------------------------------------------------------------


class KvClient:
    """Connections to every shard; each key goes to the connection of its shard."""

    def __init__(self, addr, token, ns=b"default", value_size=0, shm=False, timeout=10):
        self.ns = _b(ns)
        deadline = time.monotonic() + timeout
        first, info = self._hello(addr, timeout, deadline, token, ns, value_size, 0, shm)
        self.shards = info["shards"]
        self.info = info
        self.conns = [first]
        for s in range(1, self.shards):
            self.conns.append(self._hello(addr, timeout, deadline, token, ns, value_size, s,
                                          shm)[0])

    @staticmethod
    def _hello(addr, timeout, deadline, token, ns, value_size, shard, shm):
        """A connection with its HELLO said for `shard`. A BUSY answer (the
        daemon is starting, or the shard has no session free; the server
        closes), or a connection closed before any answer (the server shed
        it: docs/kv-protocol.md "Before HELLO"), is tried again on a new
        connection after 10 ms doubling to 200 ms until the deadline, as the
        C client does (docs/kv-client.md). KvConn.hello itself stays strict:
        it raises on BUSY and on a closed connection."""
        pause = 0.01
        while True:
            c = KvConn(addr, timeout)
            try:
                return c, c.hello(token, ns, value_size, shard=shard, shm=shm)
            except (KvError, EOFError, ConnectionError) as e:
                c.close()
                left = deadline - time.monotonic()
                if (isinstance(e, KvError) and e.status != St.BUSY) or left <= 0 or \
                        (not isinstance(e, KvError) and c.buf):
                    raise
            time.sleep(min(pause, left))
            pause = min(pause * 2, 0.2)

    def close(self):
        for c in self.conns:
            c.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def shard_of(self, key):
        return shard_of(self.ns, key, self.shards)

    def _split(self, keys):
        """{shard: [(index, key)]} in key order."""
        parts = {}
        for i, k in enumerate(keys):
            parts.setdefault(self.shard_of(k), []).append((i, k))
        return parts

    def _fanout(self, op, keys):
        """One frame per shard (all sent before any is read); per key results
        in key order."""
        parts = self._split(keys)
        out = [None] * len(keys)
        for s, items in parts.items():
            c = self.conns[s]
            body, count = encode_items(op, [k for _, k in items])
            c.send_frame(op, body, count)
        for s, items in parts.items():
            st, res = self.conns[s].read_response()
            if st != St.OK:
                raise KvError(op, st, res)
            if op == Op.LOOKUP:
                res = res.present
            for (i, _), r in zip(items, res):
                out[i] = r
        return out

    def lookup(self, keys):
        present = self._fanout(Op.LOOKUP, keys)
        leading = 0
        while leading < len(keys) and present[leading]:
            leading += 1
        return Lookup(leading, present)

    def delete(self, keys):
        return self._fanout(Op.DELETE, keys)

    def put(self, pairs):
        out = [None] * len(pairs)
        parts = self._split([k for k, _ in pairs])
        for s, items in parts.items():
            sts = self.conns[s].put([pairs[i] for i, _ in items])
            for (i, _), st in zip(items, sts):
                out[i] = st
        return out

    def get(self, keys):
        out = [None] * len(keys)
        for s, items in self._split(keys).items():
            vals = self.conns[s].get([k for _, k in items])
            for (i, _), v in zip(items, vals):
                out[i] = v
        return out

    SERVER_STATS = ("bytes_capacity", "slots_total", "sessions", "protocol_errors")

    def stats(self):
        """Counters over every shard: per-shard ones summed, process-wide ones
        (SERVER_STATS) as any shard reports them."""
        per = [c.stats() for c in self.conns]
        return {k: per[0][k] if k in self.SERVER_STATS else sum(p[k] for p in per)
                for k in STAT_NAMES}

    def reset(self):
        """RESET clears the namespace on the connection's shard: every shard."""
        return sum(c.reset() for c in self.conns)
