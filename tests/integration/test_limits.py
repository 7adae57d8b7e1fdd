"""Black-box tests of the S3 listener's limits, timeouts and request-smuggling
defences: every refusal must carry the right status and end the connection,
and nothing sent after the refused request may be answered.
"""
import hashlib
import socket
import ssl
import time

import pytest
from botocore.auth import SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials

from test_http import (Conn, build_request, chunked_body, get_metrics, hermetic_openlake_env,
                       metric_sum, sink_json, wait_for)
from test_s3 import AK, SK, client, error_of
from test_s3_net import make_cert

assert hermetic_openlake_env  # autouse fixture, imported to apply here too

DEBUG = ["--http.debug-endpoints", "true"]
SMUGGLED = b"GET /_openlake/health/live HTTP/1.1\r\nHost: x\r\n\r\n"


def refused(port, data, status, timeout=10):
    """Sends data, expects exactly one response with `status`, marked
    Connection: close, then the close. Returns the response."""
    with Conn(port, timeout=timeout) as c:
        try:
            c.send(data)
        except (BrokenPipeError, ConnectionResetError):
            pass  # the server may answer and close before it all went out
        r = c.read_response()
        assert r.status == status, r
        assert r.closes, r
        assert r.body.startswith(b"%d " % status), r
        c.expect_closed()
        return r


# ---- framing and smuggling ------------------------------------------------------------

HEAD_CASES = {
    # Content-Length and Transfer-Encoding together: the classic CL.TE / TE.CL.
    "cl_then_te": (b"POST /_openlake/debug/sink HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n"
                   b"Transfer-Encoding: chunked\r\n\r\n0\r\n\r\n", 400),
    "te_then_cl": (b"POST /_openlake/debug/sink HTTP/1.1\r\nHost: x\r\n"
                   b"Transfer-Encoding: chunked\r\nContent-Length: 5\r\n\r\n0\r\n\r\n", 400),
    "te_then_cl_zero": (b"POST /_openlake/debug/sink HTTP/1.1\r\nHost: x\r\n"
                        b"Transfer-Encoding: chunked\r\nContent-Length: 0\r\n\r\n", 400),
    "duplicate_cl_equal": (b"PUT /_openlake/debug/sink HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\n"
                           b"Content-Length: 3\r\n\r\nabc", 400),
    "duplicate_cl_differ": (b"PUT /_openlake/debug/sink HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\n"
                            b"Content-Length: 30\r\n\r\nabc", 400),
    "cl_list": (b"PUT /_openlake/debug/sink HTTP/1.1\r\nHost: x\r\nContent-Length: 3, 3\r\n\r\nabc", 400),
    "cl_plus": (b"PUT /_openlake/debug/sink HTTP/1.1\r\nHost: x\r\nContent-Length: +3\r\n\r\nabc", 400),
    "cl_negative": (b"PUT /_openlake/debug/sink HTTP/1.1\r\nHost: x\r\nContent-Length: -1\r\n\r\n", 400),
    "cl_hex": (b"PUT /_openlake/debug/sink HTTP/1.1\r\nHost: x\r\nContent-Length: 0x3\r\n\r\nabc", 400),
    "cl_inner_space": (b"PUT /_openlake/debug/sink HTTP/1.1\r\nHost: x\r\nContent-Length: 1 0\r\n\r\n", 400),
    "cl_huge": (b"PUT /_openlake/debug/sink HTTP/1.1\r\nHost: x\r\n"
                b"Content-Length: 99999999999999999999\r\n\r\n", 400),
    "cl_empty": (b"PUT /_openlake/debug/sink HTTP/1.1\r\nHost: x\r\nContent-Length:\r\n\r\n", 400),
    "te_chunked_twice": (b"POST /_openlake/debug/sink HTTP/1.1\r\nHost: x\r\n"
                         b"Transfer-Encoding: chunked, chunked\r\n\r\n0\r\n\r\n", 400),
    "te_chunked_two_headers": (b"POST /_openlake/debug/sink HTTP/1.1\r\nHost: x\r\n"
                               b"Transfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n\r\n"
                               b"0\r\n\r\n", 400),
    "te_identity": (b"POST /_openlake/debug/sink HTTP/1.1\r\nHost: x\r\n"
                    b"Transfer-Encoding: identity\r\n\r\n", 400),
    "te_chunked_not_last": (b"POST /_openlake/debug/sink HTTP/1.1\r\nHost: x\r\n"
                            b"Transfer-Encoding: chunked, identity\r\n\r\n0\r\n\r\n", 400),
    "te_empty": (b"POST /_openlake/debug/sink HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: \r\n\r\n", 400),
    "te_chunked_params": (b"POST /_openlake/debug/sink HTTP/1.1\r\nHost: x\r\n"
                          b"Transfer-Encoding: chunked;q=1\r\n\r\n0\r\n\r\n", 400),
    "te_on_http_1_0": (b"POST /_openlake/debug/sink HTTP/1.0\r\nHost: x\r\n"
                       b"Transfer-Encoding: chunked\r\n\r\n0\r\n\r\n", 400),
    "te_gzip_chunked": (b"POST /_openlake/debug/sink HTTP/1.1\r\nHost: x\r\n"
                        b"Transfer-Encoding: gzip, chunked\r\n\r\n0\r\n\r\n", 501),
    "te_gzip_then_chunked_headers": (b"POST /_openlake/debug/sink HTTP/1.1\r\nHost: x\r\n"
                                     b"Transfer-Encoding: gzip\r\nTransfer-Encoding: chunked\r\n\r\n"
                                     b"0\r\n\r\n", 501),
    "no_host_1_1": (b"GET /_openlake/health/live HTTP/1.1\r\nAccept: */*\r\n\r\n", 400),
    "two_hosts": (b"GET /_openlake/health/live HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n", 400),
    "host_bad_byte": (b"GET /_openlake/health/live HTTP/1.1\r\nHost: a b\r\n\r\n", 400),
    "host_slash": (b"GET /_openlake/health/live HTTP/1.1\r\nHost: a/b\r\n\r\n", 400),
    "expect_other": (b"PUT /_openlake/debug/sink HTTP/1.1\r\nHost: x\r\nExpect: 200-ok\r\n"
                     b"Content-Length: 3\r\n\r\nabc", 417),
    "expect_list": (b"PUT /_openlake/debug/sink HTTP/1.1\r\nHost: x\r\n"
                    b"Expect: 100-continue, x\r\nContent-Length: 3\r\n\r\nabc", 417),
}

MALFORMED = {
    "space_before_colon": b"GET /_openlake/health/live HTTP/1.1\r\nHost : x\r\n\r\n",
    "tab_before_colon": b"GET /_openlake/health/live HTTP/1.1\r\nHost:x\r\nX-A\t: 1\r\n\r\n",
    "obs_fold": b"GET /_openlake/health/live HTTP/1.1\r\nHost: x\r\nX-A: 1\r\n  folded\r\n\r\n",
    "fold_after_request_line": b"GET /_openlake/health/live HTTP/1.1\r\n Host: x\r\n\r\n",
    "bare_cr": b"GET /_openlake/health/live HTTP/1.1\rHost: x\r\n\r\n",
    "bare_cr_in_value": b"GET /_openlake/health/live HTTP/1.1\r\nHost: x\r\nX-A: a\rb\r\n\r\n",
    "nul_in_value": b"GET /_openlake/health/live HTTP/1.1\r\nHost: x\r\nX-A: a\0b\r\n\r\n",
    "ctl_in_target": b"GET /_openlake/\x01health HTTP/1.1\r\nHost: x\r\n\r\n",
    "double_space": b"GET  /_openlake/health/live HTTP/1.1\r\nHost: x\r\n\r\n",
    "trailing_space": b"GET /_openlake/health/live HTTP/1.1 \r\nHost: x\r\n\r\n",
    "no_target": b"GET HTTP/1.1\r\nHost: x\r\n\r\n",
    "no_version": b"GET /_openlake/health/live\r\nHost: x\r\n\r\n",
    "http_2_0": b"GET /_openlake/health/live HTTP/2.0\r\nHost: x\r\n\r\n",
    "http_1_2": b"GET /_openlake/health/live HTTP/1.2\r\nHost: x\r\n\r\n",
    "http_0_9_style": b"GET /_openlake/health/live\r\n\r\n",
    "lowercase_version": b"GET /_openlake/health/live http/1.1\r\nHost: x\r\n\r\n",
    "bad_method_char": b"G(T /_openlake/health/live HTTP/1.1\r\nHost: x\r\n\r\n",
    "bad_name_char": b"GET /_openlake/health/live HTTP/1.1\r\nHost: x\r\nBad[Name]: 1\r\n\r\n",
    "no_colon": b"GET /_openlake/health/live HTTP/1.1\r\nHost: x\r\nNoColonHere\r\n\r\n",
    "empty_name": b"GET /_openlake/health/live HTTP/1.1\r\nHost: x\r\n: v\r\n\r\n",
    "tls_client_hello": bytes.fromhex("160301020001000 1fc0303".replace(" ", "")) + b"\x00" * 64,
    "binary_garbage": bytes((i * 73 + 11) % 256 for i in range(600)),
    "http2_preface": b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n",
}

CHUNK_CASES = {
    "size_not_hex": b"zz\r\n",
    "size_0x": b"0x5\r\nhello\r\n0\r\n\r\n",
    "size_leading_space": b" 5\r\nhello\r\n0\r\n\r\n",
    "size_trailing_space": b"5 \r\nhello\r\n0\r\n\r\n",
    "size_negative": b"-5\r\nhello\r\n0\r\n\r\n",
    "size_plus": b"+5\r\nhello\r\n0\r\n\r\n",
    "size_empty": b"\r\nhello\r\n0\r\n\r\n",
    "size_17_digits": b"10000000000000000\r\n",
    "size_2_pow_63": b"8000000000000000\r\n",
    "data_without_crlf": b"5\r\nhelloX\r\n0\r\n\r\n",
    "data_crlf_missing_last": b"5\r\nhello0\r\n\r\n",
    "bare_lf_after_size": b"5\nhello\r\n0\r\n\r\n",
    "bare_lf_after_data": b"5\r\nhello\n0\r\n\r\n",
    "bare_cr_after_size": b"5\rhello\r\n0\r\n\r\n",
    "bare_lf_end": b"5\r\nhello\r\n0\r\n\n",
    "bad_extension": b"5;=x\r\nhello\r\n0\r\n\r\n",
    "unterminated_quoted_ext": b'5;a="x\r\nhello\r\n0\r\n\r\n',
    "bad_trailer_line": b"5\r\nhello\r\n0\r\nnot a trailer\r\n\r\n",
    "trailer_space_before_colon": b"5\r\nhello\r\n0\r\nX-T : 1\r\n\r\n",
    "chunk_line_too_long": b"5;" + b"a" * 5000 + b"\r\nhello\r\n0\r\n\r\n",
    "trailers_too_long": b"0\r\n" + b"X-T: " + b"v" * 5000 + b"\r\n\r\n",
}


@pytest.mark.parametrize("name", sorted(HEAD_CASES))
def test_framing_refused(daemon, name):
    data, status = HEAD_CASES[name]
    refused(daemon.port, data + SMUGGLED, status)
    # The daemon is unharmed.
    with Conn(daemon.port) as c:
        assert c.request("GET", "/_openlake/health/live").status == 200


@pytest.mark.parametrize("name", sorted(MALFORMED))
def test_malformed_head_is_400(daemon, name):
    refused(daemon.port, MALFORMED[name], 400)


@pytest.mark.parametrize("name", sorted(CHUNK_CASES))
def test_bad_chunked_body_is_400(daemon, name):
    head = build_request("POST", "/_openlake/debug/sink", headers=[("Transfer-Encoding", "chunked")])
    refused(daemon.port, head + CHUNK_CASES[name] + SMUGGLED, 400)


def test_malformed_after_good_request_on_same_connection(daemon):
    """A keep-alive connection that goes bad mid-stream: the good requests are
    answered, then one 400, then close."""
    with Conn(daemon.port) as c:
        c.send(build_request("GET", "/_openlake/health/live")
               + build_request("PUT", "/_openlake/debug/sink", body=b"abc")
               + b"GET /x HTTP/1.1\r\nHost : x\r\n\r\n" + SMUGGLED)
        assert c.read_response().status == 200
        assert sink_json(c.read_response())[0] == 3
        r = c.read_response()
        assert r.status == 400 and r.closes
        c.expect_closed()


def test_valid_framing_variants_accepted(daemon):
    """The strict rules must not refuse what is legal."""
    with Conn(daemon.port) as c:
        for headers, body in [
            ([("content-length", "3")], b"abc"),
            ([("Content-Length", "003")], b"abc"),
            ([("Transfer-Encoding", "Chunked")], b"3\r\nabc\r\n0\r\n\r\n"),
            ([("Transfer-Encoding", " chunked ")], b"3\r\nabc\r\n0\r\n\r\n"),
            ([("Expect", "")], b""),
            ([("Host", "[::1]:9000")], b""),
        ]:
            raw = build_request("PUT", "/_openlake/debug/sink", headers=headers, body=body,
                                host=not any(k == "Host" for k, _ in headers))
            c.send(raw)
            r = c.read_response()
            assert r.status == 200, (headers, r)
            assert sink_json(r)[0] == (3 if body else 0)
            assert not r.closes


# ---- body size --------------------------------------------------------------------


def test_max_body_bytes(make_daemon):
    d = make_daemon(args=DEBUG + ["--http.max-body-bytes", "1000"])
    with Conn(d.port) as c:
        r = c.request("PUT", "/_openlake/debug/sink", body=b"a" * 1000)
        assert sink_json(r)[0] == 1000 and not r.closes
        r = c.request("PUT", "/_openlake/debug/sink", headers=[("Transfer-Encoding", "chunked")],
                      body=chunked_body(b"b" * 1000, [333]))
        assert sink_json(r)[0] == 1000 and not r.closes
    # Declared too large: refused before any body byte is read.
    refused(d.port, build_request("PUT", "/_openlake/debug/sink",
                                  headers=[("Content-Length", "1001")]), 413)
    refused(d.port, build_request("PUT", "/_openlake/debug/sink",
                                  headers=[("Content-Length", str(1 << 40))]), 413)
    # Chunked: one chunk, and many chunks adding up.
    head = build_request("PUT", "/_openlake/debug/sink", headers=[("Transfer-Encoding", "chunked")])
    refused(d.port, head + b"3e9\r\n", 413)
    refused(d.port, head + chunked_body(b"c" * 1200, [100]) + SMUGGLED, 413)
    # With Expect: the 413 comes instead of 100 Continue.
    with Conn(d.port) as c:
        c.send(build_request("PUT", "/_openlake/debug/sink",
                             headers=[("Expect", "100-continue"), ("Content-Length", "5000")]))
        r = c.read_response()  # an interim 100 would fail here
        assert r.status == 413 and r.closes
        c.expect_closed()


def test_max_body_bytes_zero_is_unlimited(make_daemon):
    d = make_daemon(args=DEBUG + ["--http.max-body-bytes", "0"])
    data = b"z" * (6 << 20)
    with Conn(d.port) as c:
        r = c.request("PUT", "/_openlake/debug/sink", body=data)
        assert sink_json(r) == (len(data), hashlib.sha256(data).hexdigest())


# ---- head size and count ----------------------------------------------------------------


def head_of_size(n, target="/_openlake/health/live"):
    """A GET head of exactly n bytes (through the final CRLF CRLF)."""
    base = build_request("GET", target, headers=[("X-Pad", "")])
    pad = n - len(base)
    assert pad >= 0
    return build_request("GET", target, headers=[("X-Pad", "p" * pad)])


def test_max_header_bytes(make_daemon):
    d = make_daemon(args=DEBUG + ["--http.max-header-bytes", "2048"])
    ok, big = head_of_size(2048), head_of_size(2049)
    assert len(ok) == 2048 and len(big) == 2049
    with Conn(d.port) as c:
        assert c.request("GET", "/_openlake/health/live").status == 200
        c.send(ok)
        assert c.read_response().status == 200
        # The same head arriving in pieces (staged across receives).
        for cut in (1, 100, 2000, 2047):
            c.send(ok[:cut])
            time.sleep(0.02)
            c.send(ok[cut:])
            assert c.read_response().status == 200
    r = refused(d.port, big, 431)
    assert b"max_header_bytes" in r.body
    with Conn(d.port) as c:
        c.send(big[:1000])
        time.sleep(0.05)
        try:
            c.send(big[1000:])
        except OSError:
            pass
        r = c.read_response()
        assert r.status == 431 and r.closes
        c.expect_closed()
    # A head that never ends: refused once the limit is passed, not left waiting.
    refused(d.port, b"GET / HTTP/1.1\r\nHost: x\r\nX-Pad: " + b"q" * 100000, 431)
    # A good request, then a pipelined oversized one.
    with Conn(d.port) as c:
        c.send(build_request("GET", "/_openlake/health/live") + big)
        assert c.read_response().status == 200
        r = c.read_response()
        assert r.status == 431 and r.closes
        c.expect_closed()


def test_max_headers(make_daemon):
    d = make_daemon(args=DEBUG + ["--http.max-headers", "10"])
    with Conn(d.port) as c:
        # Host + 9 = 10 header fields: fine.
        r = c.request("GET", "/_openlake/health/live", headers=[(f"X-H{i}", "v") for i in range(9)])
        assert r.status == 200 and not r.closes
    r = refused(d.port, build_request("GET", "/_openlake/health/live",
                                      headers=[(f"X-H{i}", "v") for i in range(10)]), 431)
    assert b"max_headers" in r.body
    refused(d.port, build_request("GET", "/_openlake/health/live",
                                  headers=[(f"X-H{i}", "v") for i in range(500)]), 431)


# ---- timeouts ------------------------------------------------------------------------------


def test_slowloris_header_timeout(make_daemon):
    """A head trickled in one header line at a time never completes: 408 and
    close soon after header_timeout_ms, although bytes keep arriving."""
    d = make_daemon(args=DEBUG + ["--http.header-timeout-ms", "500",
                                  "--http.idle-timeout-ms", "60000"])
    with Conn(d.port) as c:
        t0 = time.time()
        c.send(b"GET /_openlake/health/live HTTP/1.1\r\n")
        c.sock.settimeout(0.1)
        got = b""
        for i in range(300):  # at most ~30 s: far past the 0.5 s, short of the idle 60 s
            try:
                c.send(b"X-Slow-%d: %d\r\n" % (i, i))
            except OSError:
                break
            try:
                got = c.sock.recv(65536)
                break
            except socket.timeout:
                continue
        elapsed = time.time() - t0
        c.sock.settimeout(10)
        c.buf += got
        r = c.read_response()
        assert r.status == 408 and r.closes, r
        assert 0.4 <= elapsed < 30, elapsed
        c.expect_closed()
    with Conn(d.port) as c:
        assert c.request("GET", "/_openlake/health/live").status == 200


def test_header_timeout_does_not_hit_complete_requests(make_daemon):
    d = make_daemon(args=DEBUG + ["--http.header-timeout-ms", "300"])
    with Conn(d.port) as c:
        for _ in range(4):
            assert c.request("GET", "/_openlake/health/live").status == 200
            time.sleep(0.15)
        # A slow body is governed by the idle timeout, not the head timeout.
        c.send(build_request("PUT", "/_openlake/debug/sink", headers=[("Content-Length", "6")]))
        for b in b"abcdef":
            time.sleep(0.1)
            c.send(bytes([b]))
        assert sink_json(c.read_response())[0] == 6


def test_idle_keep_alive_closed(make_daemon):
    # Each t0 is taken before the server's idle clock can start, so the lower
    # bounds hold however late this process runs.
    d = make_daemon(args=DEBUG + ["--http.idle-timeout-ms", "500"])
    with Conn(d.port) as c:
        t0 = time.monotonic()
        assert c.request("GET", "/_openlake/health/live").status == 200
        c.expect_closed()
        assert time.monotonic() - t0 >= 0.3
    # A connection that never sends anything is closed too.
    t0 = time.monotonic()
    with Conn(d.port) as c:
        c.expect_closed()
        assert time.monotonic() - t0 >= 0.3
    # A partial head that stops making progress is not kept either.
    t0 = time.monotonic()
    with Conn(d.port) as c:
        c.send(b"GET /_openlake/health/live HTTP/1.1\r\n")
        c.sock.settimeout(30)
        try:
            data = c.sock.recv(65536)
        except ConnectionResetError:
            data = b""
        # Today the server closes without a response (the idle timer fires
        # before header_timeout_ms); a 408 would be as good.
        assert data == b"" or data.startswith(b"HTTP/1.1 408 "), data
        assert time.monotonic() - t0 >= 0.3


def test_activity_keeps_connection_open(make_daemon):
    # Gaps of 0.1 s against a 2 s idle timeout: room for a loaded machine.
    d = make_daemon(args=DEBUG + ["--http.idle-timeout-ms", "2000"])
    with Conn(d.port) as c:
        for _ in range(25):  # 2.5 s in all, 0.1 s apart
            assert c.request("GET", "/_openlake/health/live").status == 200
            time.sleep(0.1)
        # A body trickling in with progress every 0.1 s is not stalled.
        c.send(build_request("PUT", "/_openlake/debug/sink", headers=[("Content-Length", "25")]))
        for i in range(25):
            time.sleep(0.1)
            c.send(b"x")
        assert sink_json(c.read_response())[0] == 25


def test_stalled_body_is_408(make_daemon):
    d = make_daemon(args=DEBUG + ["--http.idle-timeout-ms", "500"])
    with Conn(d.port, timeout=60) as c:
        t0 = time.monotonic()   # before the bytes reach the server
        c.send(build_request("PUT", "/_openlake/debug/sink", headers=[("Content-Length", "100")])
               + b"x" * 10)
        r = c.read_response()
        assert r.status == 408 and r.closes, r
        assert b"stalled" in r.body
        assert 0.3 <= time.monotonic() - t0 < 30
        c.expect_closed()
    with Conn(d.port) as c:  # chunked too
        c.send(build_request("PUT", "/_openlake/debug/sink",
                             headers=[("Transfer-Encoding", "chunked")]) + b"64\r\nabc")
        r = c.read_response()
        assert r.status == 408 and r.closes, r
        c.expect_closed()


def closed_within(c, limit):
    """Seconds until the server closes c without sending anything (at most
    `limit`; fails when it is still open then)."""
    t0 = time.time()
    c.expect_closed(timeout=limit)
    return time.time() - t0


def test_silent_new_connection_closed_at_header_timeout(make_daemon):
    """A connection that never sends a byte gets header_timeout_ms, not the
    (much longer) idle timeout, and no answer: it made no request."""
    d = make_daemon(args=DEBUG + ["--http.header-timeout-ms", "1000",
                                  "--http.idle-timeout-ms", "30000"])
    with Conn(d.port) as c:
        assert 0.8 <= closed_within(c, 10) < 10
    assert metric_sum(get_metrics(d.port), "openlake_http_header_timeouts_total") >= 1


def test_keep_alive_connection_waits_for_idle_timeout(make_daemon):
    """After a complete request, a silent connection is idle keep-alive: the
    header timeout does not apply until the next request's first byte."""
    d = make_daemon(args=DEBUG + ["--http.header-timeout-ms", "500",
                                  "--http.idle-timeout-ms", "3000"])
    with Conn(d.port) as c:
        assert c.request("GET", "/_openlake/health/live").status == 200
        t0 = time.time()
        c.expect_open(wait=1.5)  # three header timeouts
        c.expect_closed(timeout=10)
        assert 2.5 <= time.time() - t0 < 10
    # its next request's first byte starts the header timeout again
    with Conn(d.port) as c:
        assert c.request("GET", "/_openlake/health/live").status == 200
        c.send(b"GET /_openlake/health/live HTTP/1.1\r\n")
        t0 = time.time()
        r = c.read_response()
        assert r.status == 408 and r.closes, r
        assert 0.3 <= time.time() - t0 < 2.5
        c.expect_closed()


# ---- body rate -------------------------------------------------------------------------------

RATE = ["--http.body-min-rate", "100", "--http.body-rate-window-ms", "1000",
        "--http.idle-timeout-ms", "30000"]


def s3_rate_daemon(make_daemon):
    d = make_daemon(args=["--mode", "s3"] + RATE,
                    env={"OPENLAKE_ACCESS_KEY": AK, "OPENLAKE_SECRET_KEY": SK})
    client(d).create_bucket(Bucket="rate")
    return d


def signed_put_head(d, key, length):
    """The head of a SigV4-signed PUT (UNSIGNED-PAYLOAD) of `length` bytes,
    for sending its body by hand."""
    req = AWSRequest(method="PUT", url=f"http://127.0.0.1:{d.port}/rate/{key}",
                     headers={"Content-Length": str(length)})
    req.headers["x-amz-content-sha256"] = "UNSIGNED-PAYLOAD"
    SigV4Auth(Credentials(AK, SK), "s3", "us-east-1").add_auth(req)
    return build_request("PUT", f"/rate/{key}", headers=[("Host", f"127.0.0.1:{d.port}")]
                         + list(req.headers.items()), host=False)


def expect_trickle_cut(c, marker, status=408):
    """Sends body bytes one every 0.5 s until the server answers (at most
    15 s): it must answer `status` (S3: 400 RequestTimeout, as AWS; the
    HTTP layer's own answer: 408) with `marker` in the body and
    Connection: close, after about one 1 s window."""
    t0 = time.time()
    c.sock.settimeout(0.5)
    while time.time() - t0 < 15:
        try:
            c.send(b"x")
        except OSError:
            break  # closed: the answer is already queued for us
        try:
            got = c.sock.recv(65536)
        except socket.timeout:
            continue
        except (ConnectionResetError, ssl.SSLError):
            break
        c.buf += got
        c.eof = not got
        break
    elapsed = time.time() - t0
    c.sock.settimeout(10)
    r = c.read_response()
    assert r.status == status and r.closes, r
    assert marker in r.body, r
    assert 0.8 <= elapsed < 10, elapsed


def test_trickled_s3_body_is_cut_with_request_timeout(make_daemon):
    """One body byte every 0.5 s (2 B/s) against a minimum of 100 B/s over
    1 s windows: each byte is progress, so the idle timeout never fires, but
    the first window ends the request: RequestTimeout (400, as AWS), connection
    closed, and the object was never written."""
    d = s3_rate_daemon(make_daemon)
    with Conn(d.port) as c:
        c.send(signed_put_head(d, "slow", 1000))
        expect_trickle_cut(c, b"<Code>RequestTimeout</Code>", 400)
        c.expect_closed()
    code, status, _ = error_of(lambda: client(d).get_object(Bucket="rate", Key="slow"))
    assert (code, status) == ("NoSuchKey", 404)
    samples = get_metrics(d.port)
    assert metric_sum(samples, "openlake_http_slow_bodies_total") == 1
    assert metric_sum(samples, "openlake_http_requests_total", code=400) == 1


def test_body_above_min_rate_is_never_cut(make_daemon):
    """50 bytes every 0.1 s (500 B/s, five times the minimum) for about five
    windows: stored whole."""
    d = s3_rate_daemon(make_daemon)
    data = bytes(range(256)) * 10  # 2560 bytes
    with Conn(d.port) as c:
        c.send(signed_put_head(d, "steady", len(data)))
        for off in range(0, len(data), 50):
            c.send(data[off:off + 50])
            time.sleep(0.1)
        r = c.read_response()
        assert r.status == 200, r
    assert client(d).get_object(Bucket="rate", Key="steady")["Body"].read() == data
    assert metric_sum(get_metrics(d.port), "openlake_http_slow_bodies_total") == 0


def test_server_pause_does_not_count_against_the_body(make_daemon):
    """The sink holds (pauses) the body for 2.5 s, longer than two windows,
    while the whole body waits in the server's queue: the server was not
    receiving, so no window ends and the upload is answered 200."""
    d = make_daemon(args=DEBUG + RATE)
    data = b"p" * 500
    with Conn(d.port) as c:
        r = c.request("PUT", "/_openlake/debug/sink?hold_ms=2500", body=data)
        assert sink_json(r) == (len(data), hashlib.sha256(data).hexdigest())
        # and with 100-continue, the hold before the body is not the client's either
        c.send(build_request("PUT", "/_openlake/debug/sink?hold_ms=2500",
                             headers=[("Expect", "100-continue"),
                                      ("Content-Length", str(len(data)))]))
        assert c.read_response(allow_100=True).status == 100
        c.send(data)
        assert sink_json(c.read_response()) == (len(data), hashlib.sha256(data).hexdigest())
    assert metric_sum(get_metrics(d.port), "openlake_http_slow_bodies_total") == 0


def test_trickled_chunked_body_is_cut(make_daemon):
    """Chunk framing counts as body bytes, but a trickle is still a trickle;
    outside S3 the server's own 408 answers."""
    d = make_daemon(args=DEBUG + RATE)
    with Conn(d.port) as c:
        c.send(build_request("PUT", "/_openlake/debug/sink",
                             headers=[("Transfer-Encoding", "chunked")]) + b"3e8\r\n")
        expect_trickle_cut(c, b"body_min_rate")
        c.expect_closed()


def test_tls_timeouts(make_daemon, tmp_path):
    """Over TLS: a connection that sends nothing is closed at the header
    timeout; a trickled body is cut with 408 inside the session."""
    cert, key = make_cert(tmp_path)
    d = make_daemon(args=DEBUG + RATE + ["--http.header-timeout-ms", "1000",
                                         "--s3-tls-cert", str(cert), "--s3-tls-key", str(key)],
                    start=False)
    d.ssl_context = ssl.create_default_context(cafile=str(cert))
    d.start()
    with Conn(d.port) as c:  # no handshake at all
        assert 0.8 <= closed_within(c, 10) < 10
    with Conn(d.port) as c:
        c.sock = d.ssl_context.wrap_socket(c.sock, server_hostname="localhost")
        c.send(build_request("PUT", "/_openlake/debug/sink",
                             headers=[("Content-Length", "1000")]))
        expect_trickle_cut(c, b"body_min_rate")


# ---- connections -----------------------------------------------------------------------------


def test_max_connections(make_daemon):
    d = make_daemon(args=DEBUG + ["--http.max-connections", "4"], threads=1)
    conns = []
    try:
        for _ in range(4):
            c = Conn(d.port)
            conns.append(c)
            assert c.request("GET", "/_openlake/health/live").status == 200
        # The fifth: 503 and close.
        with Conn(d.port) as extra:
            r = extra.read_response()
            assert r.status == 503 and r.closes, r
            assert r.header("retry-after") == "1"
            extra.expect_closed()
        # The four still work.
        for c in conns:
            assert c.request("GET", "/_openlake/health/live").status == 200
        samples = conns[0].request("GET", "/_openlake/metrics").body.decode()
        assert "openlake_http_connections_rejected_total{core=\"0\"} 1\n" in samples
        # Free one slot: a new connection gets in (once the server saw the close).
        conns.pop().close()

        def new_conn_works():
            c = Conn(d.port)
            r = c.request("GET", "/_openlake/health/live")
            if r.status == 200:
                conns.append(c)
                return True
            assert r.status == 503
            c.close()
            return False

        wait_for(new_conn_works, timeout=10, what="a free connection slot")
        # Close them all: the server is back to full capacity.
        for c in conns:
            c.close()
        conns.clear()
        wait_for(lambda: all_slots_free(d.port, 4), timeout=10, what="all slots free")
    finally:
        for c in conns:
            c.close()


def all_slots_free(port, n):
    held = []
    try:
        for _ in range(n):
            c = Conn(port)
            held.append(c)
            r = c.request("GET", "/_openlake/health/live")
            if r.status != 200:
                return False
        return True
    finally:
        for c in held:
            c.close()


def test_connections_split_between_cores(make_daemon):
    """max_connections is per process: with 2 cores each core takes half."""
    d = make_daemon(args=DEBUG + ["--http.max-connections", "4"], threads=2)
    conns, statuses = [], []
    try:
        for _ in range(12):
            c = Conn(d.port)
            conns.append(c)
            try:
                statuses.append(c.request("GET", "/_openlake/health/live").status)
            except (EOFError, ConnectionResetError):
                statuses.append(None)
        assert statuses.count(200) <= 4, statuses
        assert statuses.count(503) >= 8 - statuses.count(None), statuses
    finally:
        for c in conns:
            c.close()


def test_server_generated_errors_carry_date(daemon):
    """RFC 9110 6.6.1: an origin server with a clock sends Date, also on the
    errors the HTTP layer writes itself (400 here, before any handler)."""
    with Conn(daemon.port) as c:
        c.send(b"GET / HTTP/1.1\r\n\r\n")  # no Host: 400
        r = c.read_response()
        assert r.status == 400
        assert r.header("date", "").endswith(" GMT")
        c.expect_closed()
