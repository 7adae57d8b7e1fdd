"""Black-box tests of the S3 listener's HTTP/1.1 behaviour: routes, methods,
keep-alive, pipelining, request and response framing, Expect, HEAD,
Connection handling and the debug sink/source endpoints.

Every request goes over a raw socket to 127.0.0.1 so the exact bytes on the
wire are under the test's control. The small HTTP client below (Conn) is also
used by test_limits.py and test_daemon.py.
"""
import hashlib
import random
import re
import socket
import subprocess
import threading
import time

import pytest

import conftest


@pytest.fixture(autouse=True)
def hermetic_openlake_env(monkeypatch):
    """conftest's Daemon passes the whole environment on to openlaked, which
    reads every OPENLAKE_* variable: OPENLAKE_BIN_DIR (the build under test)
    and any setting left in the caller's shell (OPENLAKE_THREADS, ...). Pin
    the build and drop every OPENLAKE_* variable so that each daemon sees only
    what its test sets."""
    pinned = conftest.bin_dir()
    monkeypatch.setattr(conftest, "bin_dir", lambda: pinned)
    for k in list(conftest.os.environ):
        if k.startswith("OPENLAKE_"):
            monkeypatch.delenv(k)

# ---- a minimal, strict HTTP/1.1 client -----------------------------------------------

PATTERN_LEN = 251
# Enough of the source pattern (byte i = i % 251) to check any slice of up to
# 1 MiB starting anywhere in the cycle.
PATTERN = bytes(range(PATTERN_LEN)) * ((1 << 20) // PATTERN_LEN + 2)


class Response:
    def __init__(self, version, status, reason, headers, body, trailers=None):
        self.version = version
        self.status = status
        self.reason = reason
        self.headers = headers          # list of (name, value), as received
        self.body = body
        self.trailers = trailers or []

    def header(self, name, default=None):
        name = name.lower()
        for k, v in self.headers:
            if k.lower() == name:
                return v
        return default

    def header_all(self, name):
        name = name.lower()
        return [v for k, v in self.headers if k.lower() == name]

    @property
    def closes(self):
        """True when the response announces the end of the connection."""
        return "close" in (self.header("connection") or "").lower()

    def __repr__(self):
        return f"<Response {self.status} {self.headers!r} body={self.body[:200]!r}>"


class Conn:
    """One client connection. read_response() parses exactly one response."""

    def __init__(self, port, timeout=10):
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=timeout)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.buf = bytearray()
        self.eof = False

    # -- plumbing
    def send(self, data):
        self.sock.sendall(data)

    def close(self, reset=False):
        if reset:
            # SO_LINGER 0: close() sends RST instead of FIN.
            self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, b"\x01\0\0\0\0\0\0\0")
        self.sock.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.sock.close()

    def _fill(self):
        if self.eof:
            raise EOFError("connection closed by the server")
        b = self.sock.recv(1 << 20)
        if not b:
            self.eof = True
            raise EOFError("connection closed by the server")
        self.buf += b

    def read_line(self, limit=65536):
        while True:
            i = self.buf.find(b"\n")
            if i >= 0:
                line = bytes(self.buf[:i + 1])
                del self.buf[:i + 1]
                assert line.endswith(b"\r\n"), f"bare LF in response: {line!r}"
                return line[:-2]
            assert len(self.buf) < limit, "response line too long"
            self._fill()

    def read_exact(self, n):
        out = bytearray()
        self.read_stream(n, out.extend)
        return bytes(out)

    def read_stream(self, n, sink):
        """Reads n bytes and hands them to sink in pieces of at most 1 MiB."""
        if self.buf:
            take = min(n, len(self.buf))
            sink(bytes(self.buf[:take]))
            del self.buf[:take]
            n -= take
        mv = memoryview(bytearray(1 << 20))
        while n > 0:
            k = self.sock.recv_into(mv, min(n, len(mv)))
            if k == 0:
                self.eof = True
                raise EOFError(f"connection closed with {n} body bytes missing")
            sink(bytes(mv[:k]))
            n -= k

    def _read_headers(self):
        headers = []
        while True:
            line = self.read_line()
            if not line:
                return headers
            name, sep, value = line.partition(b":")
            assert sep and name and name.strip() == name, f"bad header line {line!r}"
            headers.append((name.decode("latin-1"), value.strip().decode("latin-1")))

    def read_response(self, method="GET", sink=None, allow_100=False):
        """Parses one response. Body framing follows RFC 9112 section 6.3.

        sink: callable taking body pieces (large bodies are then not kept).
        allow_100: return a 1xx interim response instead of failing on it.
        """
        line = self.read_line()
        m = re.fullmatch(rb"HTTP/(1\.[01]) ([0-9]{3}) (.*)", line)
        assert m, f"bad status line {line!r}"
        version, status, reason = m.group(1).decode(), int(m.group(2)), m.group(3).decode()
        headers = self._read_headers()
        resp = Response(version, status, reason, headers, b"")
        if 100 <= status < 200:
            assert allow_100, f"unexpected interim response {resp!r}"
            return resp
        body = bytearray()
        out = sink or body.extend
        te = resp.header_all("transfer-encoding")
        cl = resp.header_all("content-length")
        assert not (te and cl), f"both Transfer-Encoding and Content-Length: {resp!r}"
        assert len(cl) <= 1, f"several Content-Length: {resp!r}"
        if method == "HEAD" or status in (204, 304):
            pass
        elif te:
            assert [t.strip().lower() for t in ",".join(te).split(",")] == ["chunked"], te
            while True:
                size_line = self.read_line()
                assert re.fullmatch(rb"[0-9a-fA-F]+", size_line), f"chunk line {size_line!r}"
                size = int(size_line, 16)
                if size == 0:
                    break
                self.read_stream(size, out)
                assert self.read_exact(2) == b"\r\n", "chunk data not followed by CRLF"
            resp.trailers = self._read_headers()
        elif cl:
            self.read_stream(int(cl[0]), out)
        else:
            # Delimited by close: the server never does this, but be exact.
            while not self.eof:
                try:
                    self._fill()
                except EOFError:
                    break
            out(bytes(self.buf))
            self.buf.clear()
        resp.body = bytes(body)
        return resp

    def request(self, method, target, headers=(), body=b"", version="1.1", host=True):
        self.send(build_request(method, target, headers, body, version, host))
        return self.read_response(method)

    def expect_closed(self, timeout=30):
        """Asserts the server closes the connection (FIN or RST) within timeout
        seconds without sending anything more."""
        assert not self.buf, f"unexpected bytes after the response: {bytes(self.buf)!r}"
        if self.eof:
            return
        self.sock.settimeout(timeout)
        try:
            extra = self.sock.recv(65536)
        except ConnectionResetError:
            extra = b""
        except socket.timeout:
            raise AssertionError(f"connection still open after {timeout}s")
        assert extra == b"", f"unexpected bytes instead of close: {extra!r}"
        self.eof = True

    def expect_open(self, wait=0.2):
        """Asserts nothing arrives and the connection stays open for `wait` s."""
        self.sock.settimeout(wait)
        try:
            extra = self.sock.recv(65536)
        except socket.timeout:
            return
        finally:
            self.sock.settimeout(10)
        raise AssertionError(f"connection not idle: got {extra!r}")


def build_request(method, target, headers=(), body=b"", version="1.1", host=True):
    lines = [f"{method} {target} HTTP/{version}"]
    if host:
        lines.append("Host: 127.0.0.1")
    lines += [f"{k}: {v}" for k, v in headers]
    if body and not any(k.lower() in ("content-length", "transfer-encoding") for k, _ in headers):
        lines.append(f"Content-Length: {len(body)}")
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + body


def chunked_body(data, sizes, ext=lambda i: "", trailers=b""):
    """Frames data as a chunked body with chunk sizes cycling through `sizes`."""
    parts, off, i = [], 0, 0
    while off < len(data):
        n = min(sizes[i % len(sizes)], len(data) - off)
        parts.append(b"%x%s\r\n" % (n, ext(i).encode()) + data[off:off + n] + b"\r\n")
        off += n
        i += 1
    parts.append(b"0\r\n" + trailers + b"\r\n")
    return b"".join(parts)


def parse_responses(port, data, count, method="GET"):
    """Sends data on a new connection and reads `count` responses."""
    with Conn(port) as c:
        c.send(data)
        return [c.read_response(method) for _ in range(count)], c


class PatternCheck:
    """Sink for read_response that checks the source pattern as it streams."""

    def __init__(self):
        self.n = 0

    def __call__(self, piece):
        off = 0
        while off < len(piece):
            k = min(len(piece) - off, 1 << 20)
            start = (self.n + off) % PATTERN_LEN
            if piece[off:off + k] != PATTERN[start:start + k]:
                raise AssertionError(f"source byte mismatch near offset {self.n + off}")
            off += k
        self.n += len(piece)


def sink_json(resp):
    m = re.fullmatch(rb'\{"bytes":([0-9]+),"sha256":"([0-9a-f]{64})"\}\n', resp.body)
    assert m, resp
    return int(m.group(1)), m.group(2).decode()


# ---- Prometheus text ----------------------------------------------------------------

METRIC_LINE = re.compile(
    r'([a-zA-Z_:][a-zA-Z0-9_:]*)(\{(?:[a-zA-Z_][a-zA-Z0-9_]*="(?:[^"\\\n]|\\.)*",?)*\})? '
    r'(-?[0-9.eE+-]+|\+Inf|-Inf|NaN)( -?[0-9]+)?')
LABEL = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\\n]|\\.)*)"')


def parse_metrics(text):
    """Parses Prometheus text format 0.0.4 strictly; returns
    {(name, ((label, value), ...)): float} and {name: type}."""
    samples, types, helps = {}, {}, {}
    assert text.endswith("\n"), "metrics text must end with a newline"
    for line in text.splitlines():
        if not line:
            continue
        if line.startswith("#"):
            parts = line.split(" ", 3)
            if len(parts) >= 3 and parts[1] == "TYPE":
                assert parts[3] in ("counter", "gauge", "histogram", "summary", "untyped"), line
                assert parts[2] not in types, f"TYPE twice: {line}"
                types[parts[2]] = parts[3]
            elif len(parts) >= 3 and parts[1] == "HELP":
                assert parts[2] not in helps, f"HELP twice: {line}"
                helps[parts[2]] = parts[3] if len(parts) > 3 else ""
            continue
        m = METRIC_LINE.fullmatch(line)
        assert m, f"not a Prometheus sample line: {line!r}"
        labels = tuple(sorted(LABEL.findall(m.group(2) or "")))
        key = (m.group(1), labels)
        assert key not in samples, f"duplicate sample {line!r}"
        samples[key] = float(m.group(3))
    for (name, _), _ in samples.items():
        base = re.sub(r"_(bucket|sum|count)$", "", name)
        assert name in types or base in types, f"sample {name} without # TYPE"
    return samples, types


def get_metrics(port):
    with Conn(port) as c:
        r = c.request("GET", "/_openlake/metrics")
    assert r.status == 200, r
    assert r.header("content-type", "").startswith("text/plain"), r
    return parse_metrics(r.body.decode())[0]


def metric_sum(samples, name, **labels):
    """Sum of every sample of `name` whose labels include `labels`."""
    want = {(k, str(v)) for k, v in labels.items()}
    return sum(v for (n, ls), v in samples.items() if n == name and want <= set(ls))


def wait_for(pred, timeout=10, interval=0.05, what="condition"):
    deadline = time.time() + timeout
    while True:
        v = pred()
        if v:
            return v
        if time.time() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(interval)


def active_conns(port):
    """openlake_http_connections_active, minus the connection asking."""
    return metric_sum(get_metrics(port), "openlake_http_connections_active") - 1


# ---- routes and methods ------------------------------------------------------------------


def test_health_live_and_ready(daemon):
    with Conn(daemon.port) as c:
        r = c.request("GET", "/_openlake/health/live")
        assert (r.status, r.body) == (200, b"ok\n")
        assert r.header("content-length") == "3"
        assert r.header("server") == "OpenLake"
        assert re.fullmatch(r"\w{3}, \d\d \w{3} \d{4} \d\d:\d\d:\d\d GMT", r.header("date"))
        assert not r.closes
        r = c.request("HEAD", "/_openlake/health/live")
        assert (r.status, r.body, r.header("content-length")) == (200, b"", "3")
        r = c.request("GET", "/_openlake/health/ready")
        assert (r.status, r.body) == (200, b"ready\n")
        r = c.request("HEAD", "/_openlake/health/ready")
        assert (r.status, r.body, r.header("content-length")) == (200, b"", "6")
        # A query string does not change the route.
        r = c.request("GET", "/_openlake/health/live?verbose=1")
        assert (r.status, r.body) == (200, b"ok\n")
        # The connection is still usable after HEAD: no stray body bytes.
        r = c.request("GET", "/_openlake/health/live")
        assert r.status == 200
        c.expect_open()


def test_metrics_endpoint(daemon):
    with Conn(daemon.port) as c:
        r = c.request("GET", "/_openlake/metrics")
        assert r.status == 200
        assert r.header("content-type") == "text/plain; version=0.0.4"
        samples, types = parse_metrics(r.body.decode())
        for name, kind in [("openlake_http_connections_active", "gauge"),
                           ("openlake_http_connections_total", "counter"),
                           ("openlake_http_connections_rejected_total", "counter"),
                           ("openlake_http_requests_total", "counter"),
                           ("openlake_http_request_duration_seconds", "histogram"),
                           ("openlake_http_received_bytes_total", "counter"),
                           ("openlake_http_sent_bytes_total", "counter")]:
            assert types.get(name) == kind, (name, types)
        r = c.request("HEAD", "/_openlake/metrics")
        assert r.status == 200 and r.body == b""
        assert int(r.header("content-length")) > 0


S3_ERROR = re.compile(
    rb'<\?xml version="1.0" encoding="UTF-8"\?>\n<Error><Code>AccessDenied</Code>'
    rb'<Message>[^<]+</Message><Resource>(.*)</Resource><RequestId>([0-9A-F]{16})</RequestId>'
    rb'</Error>')


@pytest.mark.parametrize("target", ["/", "/bucket", "/bucket/key", "/bucket/a/b?list-type=2",
                                    "/_openlakex", "/_openlake_x/y", "*"])
def test_unsigned_s3_requests_are_denied(daemon, target):
    """Every path outside /_openlake/ is the S3 API, which refuses anonymous
    requests with an S3 error document (test_s3.py has the signed ones)."""
    with Conn(daemon.port) as c:
        r = c.request("GET", target)
        assert r.status == 403, r
        assert r.header("content-type") == "application/xml"
        m = S3_ERROR.fullmatch(r.body)
        assert m, r.body
        assert m.group(2).decode() == r.header("x-amz-request-id")
        assert not r.closes


def test_s3_error_escapes_resource_and_ids_are_unique(daemon):
    ids = set()
    with Conn(daemon.port) as c:
        for method in ["GET", "PUT", "DELETE", "POST", "HEAD", "FOO"]:
            r = c.request(method, "/b/<k>&'\"")
            assert r.status == 403, r
            rid = r.header("x-amz-request-id")
            assert re.fullmatch(r"[0-9A-F]{16}", rid), rid
            ids.add(rid)
            if method == "HEAD":
                assert r.body == b"" and int(r.header("content-length")) > 0
                continue
            m = S3_ERROR.fullmatch(r.body)
            assert m, r.body
            assert m.group(1) == b"/b/&lt;k&gt;&amp;&apos;&quot;"
    assert len(ids) == 6


@pytest.mark.parametrize("method,target", [
    ("POST", "/_openlake/health/live"),
    ("PUT", "/_openlake/health/live"),
    ("DELETE", "/_openlake/health/ready"),
    ("PATCH", "/_openlake/health/ready"),
    ("POST", "/_openlake/metrics"),
    ("DELETE", "/_openlake/metrics"),
    ("OPTIONS", "/_openlake/metrics"),
    ("GET", "/_openlake/debug/sink"),
    ("HEAD", "/_openlake/debug/sink"),
    ("DELETE", "/_openlake/debug/sink"),
    ("PUT", "/_openlake/debug/source?bytes=10"),
    ("POST", "/_openlake/debug/source"),
    ("get", "/_openlake/health/live"),  # methods are case-sensitive
])
def test_wrong_method_is_405(daemon, method, target):
    with Conn(daemon.port) as c:
        r = c.request(method, target, headers=[("Content-Length", "0")])
        assert r.status == 405, r
        allow = r.header("allow")
        assert allow in ("GET, HEAD", "PUT, POST"), allow  # RFC 9110 15.5.6
        if method != "HEAD":
            assert r.body.startswith(b"method not allowed; use ")
        # Nothing was left unread: the connection stays usable.
        assert not r.closes
        assert c.request("GET", "/_openlake/health/live").status == 200


def test_405_with_unread_body_closes(daemon):
    with Conn(daemon.port) as c:
        c.send(build_request("POST", "/_openlake/health/live", body=b"x" * 1000))
        r = c.read_response()
        assert r.status == 405 and r.closes
        c.expect_closed()


@pytest.mark.parametrize("target", ["/_openlake", "/_openlake/", "/_openlake/nope",
                                    "/_openlake/health", "/_openlake/health/", "/_openlake/healthz",
                                    "/_openlake/health/live/x", "/_openlake/metrics/",
                                    "/_openlake/debug/nope", "/_openlake/debug/"])
def test_unknown_admin_paths_are_404(daemon, target):
    with Conn(daemon.port) as c:
        r = c.request("GET", target)
        assert r.status == 404, r
        assert not r.closes


def test_debug_endpoints_are_off_by_default(make_daemon):
    d = make_daemon()
    with Conn(d.port) as c:
        assert c.request("GET", "/_openlake/debug/source?bytes=10").status == 404
        assert c.request("PUT", "/_openlake/debug/sink").status == 404
        assert c.request("GET", "/_openlake/health/live").status == 200
        # Answered before its body was read: the connection must end.
        r = c.request("PUT", "/_openlake/debug/sink", body=b"abc")
        assert r.status == 404 and r.closes
        c.expect_closed()


# ---- keep-alive and pipelining ------------------------------------------------------------


def test_keep_alive_many_requests_on_one_socket(daemon):
    with Conn(daemon.port) as c:
        before = c.request("GET", "/_openlake/metrics")
        total0 = metric_sum(parse_metrics(before.body.decode())[0],
                            "openlake_http_connections_total")
        for i in range(300):
            k = i % 5
            if k == 0:
                r = c.request("GET", "/_openlake/health/live")
                assert (r.status, r.body) == (200, b"ok\n")
            elif k == 1:
                r = c.request("HEAD", "/_openlake/debug/source?bytes=%d" % (i * 7))
                assert (r.status, r.header("content-length"), r.body) == (200, str(i * 7), b"")
            elif k == 2:
                body = b"%d" % i * (i % 13)
                r = c.request("PUT", "/_openlake/debug/sink", body=body)
                assert sink_json(r) == (len(body), hashlib.sha256(body).hexdigest())
            elif k == 3:
                r = c.request("GET", "/bucket/%d" % i)
                assert r.status == 403
            else:
                r = c.request("GET", "/_openlake/debug/source?bytes=%d" % (i * 31))
                assert r.status == 200 and r.body == PATTERN[:i * 31]
            assert not r.closes
        after = c.request("GET", "/_openlake/metrics")
        total1 = metric_sum(parse_metrics(after.body.decode())[0],
                            "openlake_http_connections_total")
    assert total1 == total0, "keep-alive requests opened new server connections"


def test_pipelined_requests_answered_in_order(daemon):
    body1 = b"hello world"
    body2 = bytes(range(256)) * 300
    data = b"".join([
        build_request("GET", "/_openlake/health/live"),
        build_request("PUT", "/_openlake/debug/sink", body=body1),
        build_request("POST", "/_openlake/debug/sink",
                      headers=[("Transfer-Encoding", "chunked")],
                      body=chunked_body(body2, [1000, 3, 77777])),
        build_request("GET", "/_openlake/debug/source?bytes=100000"),
        build_request("HEAD", "/_openlake/debug/source?bytes=5"),
        build_request("GET", "/_openlake/debug/source?bytes=70000&chunked=1"),
        build_request("GET", "/bucket/key"),
        build_request("GET", "/_openlake/nope"),
        build_request("GET", "/_openlake/health/ready", headers=[("Connection", "close")]),
        # After Connection: close nothing more is answered.
        build_request("GET", "/_openlake/health/live"),
    ])
    with Conn(daemon.port) as c:
        c.send(data)
        r = [c.read_response(m) for m in
             ["GET", "PUT", "POST", "GET", "HEAD", "GET", "GET", "GET", "GET"]]
        assert (r[0].status, r[0].body) == (200, b"ok\n")
        assert sink_json(r[1]) == (len(body1), hashlib.sha256(body1).hexdigest())
        assert sink_json(r[2]) == (len(body2), hashlib.sha256(body2).hexdigest())
        assert r[3].status == 200 and r[3].body == PATTERN[:100000]
        assert (r[4].status, r[4].header("content-length"), r[4].body) == (200, "5", b"")
        assert r[5].header("transfer-encoding") == "chunked" and r[5].body == PATTERN[:70000]
        assert r[6].status == 403
        assert r[7].status == 404
        assert r[8].status == 200 and r[8].closes
        assert not any(x.closes for x in r[:8])
        c.expect_closed()


def test_many_pipelined_requests_and_large_responses(daemon):
    """100 small requests in one send, then several 1 MiB responses queued
    behind each other: output backpressure with input waiting."""
    with Conn(daemon.port) as c:
        c.send(b"".join(build_request("GET", "/_openlake/health/live?i=%d" % i)
                        for i in range(100)))
        for _ in range(100):
            r = c.read_response()
            assert (r.status, r.body) == (200, b"ok\n")
        n = 1 << 20
        c.send(b"".join(build_request("GET", "/_openlake/debug/source?bytes=%d&chunked=%d"
                                      % (n + i, i % 2)) for i in range(6)))
        for i in range(6):
            chk = PatternCheck()
            r = c.read_response(sink=chk)
            assert r.status == 200 and chk.n == n + i
        c.expect_open()


def test_pipelined_input_behind_large_download(daemon):
    """A client keeps pipelining (about 1 MiB of small requests) while a
    64 MiB response streams: the server must apply backpressure, not drop
    the connection."""
    count = 20000
    reqs = b"".join(build_request("GET", "/_openlake/health/live") for _ in range(count))
    errors = []
    with Conn(daemon.port, timeout=30) as c:
        c.send(build_request("GET", "/_openlake/debug/source?bytes=%d" % (64 << 20)))

        def sender():
            try:
                c.sock.sendall(reqs)
            except OSError as e:
                errors.append(e)

        t = threading.Thread(target=sender, daemon=True)
        t.start()
        time.sleep(0.5)
        chk = PatternCheck()
        assert c.read_response(sink=chk).status == 200 and chk.n == 64 << 20
        for _ in range(count):
            assert c.read_response().status == 200
        t.join(30)
        assert not errors, errors


def test_request_split_into_single_bytes(daemon):
    body = b"0123456789" * 5
    data = (build_request("PUT", "/_openlake/debug/sink?x=1",
                          headers=[("Transfer-Encoding", "chunked"), ("X-Pad", "p" * 100)],
                          body=chunked_body(body, [7, 1, 30]))
            + build_request("GET", "/_openlake/health/live"))
    with Conn(daemon.port) as c:
        for i in range(len(data)):
            c.send(data[i:i + 1])
        r = c.read_response()
        assert sink_json(r) == (len(body), hashlib.sha256(body).hexdigest())
        assert c.read_response().status == 200


def test_leading_empty_lines_are_skipped(daemon):
    with Conn(daemon.port) as c:
        c.send(b"\r\n\r\n" + build_request("GET", "/_openlake/health/live"))
        assert c.read_response().status == 200
        # Bare LF line endings are accepted in the head (RFC 9112 section 2.2).
        c.send(b"GET /_openlake/health/live HTTP/1.1\nHost: x\n\n")
        assert c.read_response().status == 200


# ---- request bodies --------------------------------------------------------------------


def test_content_length_upload_sha256(daemon):
    data = random.Random(7).randbytes(3 * (1 << 20) + 17)
    with Conn(daemon.port) as c:
        r = c.request("PUT", "/_openlake/debug/sink", body=data)
        assert r.status == 200 and r.header("content-type") == "application/json"
        assert sink_json(r) == (len(data), hashlib.sha256(data).hexdigest())
        # Empty bodies: explicit zero length and no framing at all.
        r = c.request("POST", "/_openlake/debug/sink", headers=[("Content-Length", "0")])
        assert sink_json(r) == (0, hashlib.sha256(b"").hexdigest())
        r = c.request("POST", "/_openlake/debug/sink")
        assert sink_json(r) == (0, hashlib.sha256(b"").hexdigest())


def test_chunked_upload_odd_sizes_extensions_trailers(daemon):
    data = random.Random(11).randbytes(5 * (1 << 20) + 12345)
    sizes = [1, 3, 17, 255, 4093, 65537, 131071, 999983, 2, 16384]
    exts = ["", ";a", ";name=value", ' ; q="quoted ; string"', ";x=1;y=2", ""]

    def ext(i):
        return exts[i % len(exts)]

    trailers = (b"x-amz-checksum-sha256: " + hashlib.sha256(data).hexdigest().encode()
                + b"\r\nX-Trailer-Two:  v \r\n")
    body = chunked_body(data, sizes, ext, trailers)
    head = build_request("PUT", "/_openlake/debug/sink",
                         headers=[("Transfer-Encoding", "chunked"), ("Trailer", "x-amz-checksum-sha256")])
    with Conn(daemon.port) as c:
        c.send(head)
        # Several sends of uneven length, independent of chunk boundaries.
        off, step = 0, 1
        while off < len(body):
            c.send(body[off:off + step])
            off += step
            step = step * 7 % 300007 + 1
        r = c.read_response()
        assert sink_json(r) == (len(data), hashlib.sha256(data).hexdigest())
        assert not r.closes
        # Uppercase hex, leading zeros, and a zero-length body.
        small = b"abcdefghijklmnopqrstuvwxyz"
        r = c.request("PUT", "/_openlake/debug/sink", headers=[("Transfer-Encoding", "chunked")],
                      body=b"00A\r\n" + small[:10] + b"\r\n0010\r\n" + small[10:] + b"\r\n0\r\n\r\n")
        assert sink_json(r) == (26, hashlib.sha256(small).hexdigest())
        r = c.request("PUT", "/_openlake/debug/sink", headers=[("Transfer-Encoding", "chunked")],
                      body=b"0\r\n\r\n")
        assert sink_json(r) == (0, hashlib.sha256(b"").hexdigest())
        # Transfer-Encoding is case-insensitive and may be split over headers.
        r = c.request("PUT", "/_openlake/debug/sink", headers=[("transfer-encoding", "CHUNKED")],
                      body=b"1\r\nz\r\n0\r\n\r\n")
        assert sink_json(r) == (1, hashlib.sha256(b"z").hexdigest())


def test_sink_hold_then_body(daemon):
    """hold_ms delays reading a (small) body; the answer is still exact."""
    data = random.Random(4).randbytes(100_000)
    with Conn(daemon.port) as c:
        t0 = time.time()
        r = c.request("PUT", "/_openlake/debug/sink?hold_ms=300", body=data)
        assert sink_json(r) == (len(data), hashlib.sha256(data).hexdigest())
        assert time.time() - t0 >= 0.25
        r = c.request("POST", "/_openlake/debug/sink?hold_ms=200",
                      headers=[("Transfer-Encoding", "chunked")],
                      body=chunked_body(data, [999, 12]))
        assert sink_json(r) == (len(data), hashlib.sha256(data).hexdigest())


def test_sink_hold_backpressure(daemon):
    """While the sink holds the body the server stops reading: the client's
    sends stall well short of a 64 MiB body; then everything arrives intact."""
    total = 64 << 20
    block = random.Random(3).randbytes(1 << 20)
    sent = [0]
    errors = []

    with Conn(daemon.port, timeout=60) as c:
        t0 = time.monotonic()   # before the hold starts
        c.send(build_request("PUT", "/_openlake/debug/sink?hold_ms=5000",
                             headers=[("Content-Length", str(total))]))

        def sender():
            try:
                for _ in range(total // len(block)):
                    for off in range(0, len(block), 65536):
                        c.sock.sendall(block[off:off + 65536])
                        sent[0] += 65536
            except OSError as e:
                errors.append(e)

        t = threading.Thread(target=sender, daemon=True)
        t.start()
        # Wait for the sends to stall (no progress for 0.3 s) while the hold
        # (5 s) surely lasts: no fixed sleep that a loaded machine outruns.
        last, stalled_at = -1, None
        while time.monotonic() - t0 < 4.0:
            time.sleep(0.3)
            if sent[0] == last:
                stalled_at = last
                break
            last = sent[0]
        assert stalled_at is not None and stalled_at < total - (16 << 20), \
            f"client sent {sent[0]} bytes while the server held the body"
        t.join(60)
        assert not t.is_alive() and not errors, errors
        r = c.read_response()
        h = hashlib.sha256()
        for _ in range(total // len(block)):
            h.update(block)
        assert sink_json(r) == (total, h.hexdigest())


# ---- Expect: 100-continue --------------------------------------------------------------


def test_expect_100_continue(daemon):
    data = random.Random(5).randbytes(1 << 20)
    with Conn(daemon.port) as c:
        c.send(build_request("PUT", "/_openlake/debug/sink",
                             headers=[("Expect", "100-continue"),
                                      ("Content-Length", str(len(data)))]))
        r = c.read_response(allow_100=True)
        assert (r.status, r.reason, r.headers) == (100, "Continue", [])
        c.send(data)
        r = c.read_response()
        assert sink_json(r) == (len(data), hashlib.sha256(data).hexdigest())
        assert not r.closes
        # Chunked, mixed-case expectation.
        c.send(build_request("POST", "/_openlake/debug/sink",
                             headers=[("Expect", "100-Continue"),
                                      ("Transfer-Encoding", "chunked")]))
        assert c.read_response(allow_100=True).status == 100
        c.send(chunked_body(data, [12345]))
        assert sink_json(c.read_response()) == (len(data), hashlib.sha256(data).hexdigest())
        # A client that does not wait for 100 still gets 100 then the answer.
        c.send(build_request("PUT", "/_openlake/debug/sink",
                             headers=[("Expect", "100-continue")], body=b"abc"))
        assert c.read_response(allow_100=True).status == 100
        assert sink_json(c.read_response()) == (3, hashlib.sha256(b"abc").hexdigest())
        # No body: a 100 all the same, then the answer (clients wait for the
        # 100 before sending their empty body; botocore 1.43 misreads the next
        # answer on the connection without it).
        c.send(build_request("PUT", "/_openlake/debug/sink",
                             headers=[("Expect", "100-continue"), ("Content-Length", "0")]))
        assert c.read_response(allow_100=True).status == 100
        assert sink_json(c.read_response())[0] == 0


def test_expect_answered_early_has_no_100_and_closes(daemon):
    """A route that answers without the body: final status, no 100, close."""
    with Conn(daemon.port) as c:
        c.send(build_request("POST", "/_openlake/health/live",
                             headers=[("Expect", "100-continue"), ("Content-Length", "1000")]))
        r = c.read_response()
        assert r.status == 405 and r.closes
        c.expect_closed()


def test_expect_ignored_on_http_1_0(daemon):
    with Conn(daemon.port) as c:
        c.send(build_request("PUT", "/_openlake/debug/sink", version="1.0",
                             headers=[("Expect", "100-continue")], body=b"xyz"))
        r = c.read_response()  # fails on an interim 100
        assert sink_json(r) == (3, hashlib.sha256(b"xyz").hexdigest())
        assert r.closes
        c.expect_closed()


# ---- downloads and HEAD ------------------------------------------------------------------


@pytest.mark.parametrize("chunked", [0, 1])
def test_streaming_download_64mib(daemon, chunked):
    n = (64 << 20) + 12345
    with Conn(daemon.port, timeout=30) as c:
        chk = PatternCheck()
        t0 = time.time()
        c.send(build_request("GET", f"/_openlake/debug/source?bytes={n}&chunked={chunked}"))
        r = c.read_response(sink=chk)
        assert r.status == 200
        assert r.header("content-type") == "application/octet-stream"
        if chunked:
            assert r.header("transfer-encoding") == "chunked"
            assert r.header("content-length") is None
            assert r.trailers == []
        else:
            assert r.header("content-length") == str(n)
        assert chk.n == n
        assert not r.closes
        assert time.time() - t0 < 60
        # The connection is still in step afterwards.
        assert c.request("GET", "/_openlake/health/live").body == b"ok\n"


def test_head_matches_get_headers(daemon):
    with Conn(daemon.port) as c:
        for n in [0, 1, 251, 65536, 65537, 10 << 20]:
            g = c.request("GET", f"/_openlake/debug/source?bytes={n}")
            h = c.request("HEAD", f"/_openlake/debug/source?bytes={n}")
            assert g.status == h.status == 200
            assert g.header("content-length") == h.header("content-length") == str(n)
            assert len(g.body) == n and h.body == b""
        # HEAD of a chunked GET: no body and no chunk framing follows.
        h = c.request("HEAD", "/_openlake/debug/source?bytes=100000&chunked=1")
        assert h.status == 200 and h.body == b""
        r = c.request("HEAD", "/bucket/key")
        assert r.status == 403 and r.body == b""
        g = c.request("GET", "/bucket/key")
        assert r.header("content-length") == g.header("content-length")
        c.expect_open()


def test_source_zero_and_default(daemon):
    with Conn(daemon.port) as c:
        r = c.request("GET", "/_openlake/debug/source?bytes=0")
        assert (r.status, r.body, r.header("content-length")) == (200, b"", "0")
        r = c.request("GET", "/_openlake/debug/source")
        assert (r.status, r.body) == (200, b"")
        r = c.request("GET", "/_openlake/debug/source?bytes=0&chunked=1")
        assert (r.status, r.body) == (200, b"")


# ---- Connection handling -------------------------------------------------------------------


@pytest.mark.parametrize("value", ["close", "Close", "keep-alive, close", "CLOSE , x"])
def test_connection_close_honoured(daemon, value):
    with Conn(daemon.port) as c:
        r = c.request("GET", "/_openlake/health/live", headers=[("Connection", value)])
        assert r.status == 200 and r.closes
        c.expect_closed()


def test_connection_close_after_body_upload(daemon):
    with Conn(daemon.port) as c:
        r = c.request("PUT", "/_openlake/debug/sink", headers=[("Connection", "close")],
                      body=b"x" * 100000)
        assert sink_json(r)[0] == 100000 and r.closes
        c.expect_closed()


def test_http_1_0(daemon):
    # Without keep-alive: answered (as HTTP/1.1, with Connection: close), then closed.
    with Conn(daemon.port) as c:
        r = c.request("GET", "/_openlake/health/live", version="1.0", host=False)
        assert (r.status, r.body) == (200, b"ok\n") and r.closes
        c.expect_closed()
    # With keep-alive: stays open, says so, and serves more requests.
    with Conn(daemon.port) as c:
        for _ in range(3):
            r = c.request("GET", "/_openlake/health/live", version="1.0", host=False,
                          headers=[("Connection", "Keep-Alive")])
            assert r.status == 200
            assert r.header("connection").lower() == "keep-alive"
        r = c.request("GET", "/_openlake/debug/source?bytes=1000", version="1.0",
                      headers=[("Connection", "keep-alive")])
        assert r.body == PATTERN[:1000] and r.header("content-length") == "1000"
        c.expect_open()
        # keep-alive and close together: close wins.
        r = c.request("GET", "/_openlake/health/live", version="1.0",
                      headers=[("Connection", "keep-alive"), ("Connection", "close")])
        assert r.closes
        c.expect_closed()


def test_client_half_close_after_request_still_answered(daemon):
    with Conn(daemon.port) as c:
        c.send(build_request("GET", "/_openlake/health/live")
               + build_request("PUT", "/_openlake/debug/sink", body=b"abc"))
        c.sock.shutdown(socket.SHUT_WR)
        assert c.read_response().status == 200
        assert sink_json(c.read_response())[0] == 3
        c.expect_closed()
    # Malformed input then EOF: the 400 still arrives.
    with Conn(daemon.port) as c:
        c.send(b"BAD REQUEST\r\n\r\n")
        c.sock.shutdown(socket.SHUT_WR)
        assert c.read_response().status == 400
        c.expect_closed()


def test_client_half_close_during_held_body_still_answered(daemon):
    """The whole body was sent before the EOF; the handler just had not read
    it yet (hold_ms). The request is complete and must be answered."""
    with Conn(daemon.port) as c:
        c.send(build_request("PUT", "/_openlake/debug/sink?hold_ms=300", body=b"held" * 100))
        c.sock.shutdown(socket.SHUT_WR)
        assert sink_json(c.read_response()) == (400, hashlib.sha256(b"held" * 100).hexdigest())
        c.expect_closed()


def test_two_cores_serve_and_report(make_daemon):
    d = make_daemon(args=["--http.debug-endpoints", "true"], threads=2)
    conns = [Conn(d.port) for _ in range(16)]
    try:
        for c in conns:
            assert c.request("GET", "/_openlake/health/live").status == 200
        samples = get_metrics(d.port)
        cores = {dict(ls)["core"] for (n, ls) in samples
                 if n == "openlake_http_connections_active"}
        assert cores == {"0", "1"}
        assert metric_sum(samples, "openlake_http_connections_active") == 17
    finally:
        for c in conns:
            c.close()


def server_sndbuf(port, client_port):
    """The send buffer (ss's skmem tb) of the daemon's end of the connection
    from client_port, read from the kernel with iproute2's ss."""
    out = subprocess.run(["ss", "-tmnH", "state", "established",
                          f"( sport = :{port} and dport = :{client_port} )"],
                         capture_output=True, text=True, check=True).stdout
    m = re.search(r"\btb(\d+)\b", out)
    assert m, f"no socket of port {port} to {client_port} in: {out!r}"
    return int(m.group(1))


@pytest.mark.parametrize("setting,expect", [(None, 2 * 262144), ("100000", 2 * 100000), ("0", None)])
def test_loopback_connections_get_a_small_send_buffer(make_daemon, setting, expect):
    """http.loopback_sndbuf (default 256 KiB) is set as SO_SNDBUF on
    connections from this host (the kernel reports it doubled); 0 leaves the
    kernel's autotuning, which starts elsewhere."""
    args = [] if setting is None else ["--http.loopback-sndbuf", setting]
    d = make_daemon(args=args)
    with Conn(d.port) as c:
        assert c.request("GET", "/_openlake/health/live").status == 200
        tb = server_sndbuf(d.port, c.sock.getsockname()[1])
    if expect is None:
        assert tb not in (2 * 262144, 2 * 100000)
    else:
        assert tb == expect
