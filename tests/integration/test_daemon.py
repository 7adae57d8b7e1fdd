"""Black-box tests of openlaked as a process: command line, configuration
sources and their precedence, start-up errors, signals and graceful shutdown,
metrics, and robustness against abrupt or hostile clients.
"""
import hashlib
import os
import random
import re
import signal
import socket
import subprocess
import time

import pytest

import conftest
from test_http import (Conn, PatternCheck, active_conns, build_request, get_metrics,
                       hermetic_openlake_env, metric_sum, sink_json, wait_for)

assert hermetic_openlake_env  # autouse fixture, imported to apply here too

DEBUG = ["--http.debug-endpoints", "true"]


def clean_env(**extra):
    env = {k: v for k, v in os.environ.items() if not k.startswith("OPENLAKE_")}
    env.update(extra)
    return env


def run_openlaked(*args, env=None, cwd=None, timeout=30):
    """Runs openlaked to completion (for runs expected to exit on their own)."""
    return subprocess.run([conftest.bin_path("openlaked"), *args], capture_output=True,
                          text=True, timeout=timeout, env=env or clean_env(), cwd=cwd)


def no_sanitizer_report(text):
    for marker in conftest.SANITIZER_MARKERS:
        assert marker not in text, text


# ---- command line ----------------------------------------------------------------------


def test_help():
    for flag in ["--help", "-h"]:
        r = run_openlaked(flag)
        assert r.returncode == 0, r.stderr
        assert r.stdout.startswith("usage: openlaked")
        for word in ["--config FILE", "--help-config", "--version", "Precedence"]:
            assert word in r.stdout
        assert r.stderr == ""
    # --help wins over anything else on the line, even unknown flags.
    r = run_openlaked("--no-such-flag", "x", "--help")
    assert r.returncode == 0 and r.stdout.startswith("usage: openlaked")


def test_version():
    r = run_openlaked("--version")
    assert r.returncode == 0, r.stderr
    assert re.fullmatch(r"openlaked \d+\.\d+\.\d+ \(commit [0-9a-zA-Z.+-]+\)\n", r.stdout), r.stdout
    assert r.stderr == ""


def test_help_config_lists_every_key():
    r = run_openlaked("--help-config")
    assert r.returncode == 0, r.stderr
    keys = re.findall(r"^(\S+)$", r.stdout, re.M)
    for k in ["self_id", "mode", "rpc_addr", "s3_addr", "data_dirs", "threads", "log_level",
              "[[credentials]]", "credentials.access_key", "[cluster]", "cluster.secret_file",
              "[kv_slab]", "kv_slab.capacity_gb", "[rdma]", "rdma.devices", "[http]",
              "http.max_header_bytes", "http.max_headers", "http.header_timeout_ms",
              "http.idle_timeout_ms", "http.max_connections", "http.max_body_bytes",
              "http.shutdown_timeout_ms", "http.debug_endpoints"]:
        assert k in keys, k
    # Every plain key says its flag and environment variable or that it is file only.
    blocks = r.stdout.strip().split("\n\n")
    for b in blocks:
        name = b.split("\n", 1)[0]
        if name.startswith("["):
            continue
        assert "default" in b or "required" in b, b
        if "file only" in b:
            continue
        flag = "--" + name.replace("_", "-")
        env = "OPENLAKE_" + name.replace(".", "_").upper()
        assert f"flag {flag}, env {env}" in b, b


# ---- configuration ------------------------------------------------------------------------


def config_error(tmp_path, text, *args, env=None):
    cfg = tmp_path / "openlake.toml"
    cfg.write_text(text)
    # No --data-dirs: data_dirs from the file must be checked too (./data is
    # under tmp_path). A config that wrongly starts is stopped by the timeout.
    r = run_openlaked("--config", str(cfg), "--s3-addr", f"127.0.0.1:{conftest.free_port()}",
                      *args, env=env, cwd=tmp_path, timeout=15)
    assert r.returncode == 2, (r.returncode, r.stdout, r.stderr)
    assert r.stdout == ""
    no_sanitizer_report(r.stderr)
    return str(cfg), r.stderr


@pytest.mark.parametrize("text,line,words", [
    ('threads = 1\ns3_addr = "127.0.0.1:9000\n', 2, ["string"]),
    ('threads = 1\n[http\nmax_headers = 10\n', 2, []),
    ('threads = 1\nthreads = 2\n', 2, ["threads"]),
    ('threads =\n', 1, []),
    ('log_level = "info"\n\n\n[http]\nmax_headers = "ten"\n', 5, ["http.max_headers"]),
    ('[http]\nmax_headers = 5\n', 2, ["http.max_headers", "8"]),
    ('[http]\nmax_header_bytes = 1023\n', 2, ["http.max_header_bytes"]),
    ('mode = "both"\n', 1, ["mode"]),
    ('s3_addr = "127.0.0.1:70000"\n', 1, ["s3_addr"]),
    ('data_dirs = ["/a", "/a"]\n', 1, ["data_dirs"]),
    ('access_key = "AKIAEXAMPLE"\n', 1, ["access_key"]),
    ('self_id = 3\n[[nodes]]\nid = 1\nrpc_addr = "10.0.0.1:9100"\n', 2,
     ["[[nodes]] is gone", "registered in etcd"]),
])
def test_bad_config_exits_2_with_file_and_line(tmp_path, text, line, words):
    path, err = config_error(tmp_path, text)
    assert f"{path}:{line}" in err, err
    for w in words:
        assert w in err, err
    assert len(err.splitlines()) == 1, err


def test_unknown_keys_suggest(tmp_path):
    path, err = config_error(tmp_path, 'threads = 1\ns3_adr = "127.0.0.1:9000"\n')
    assert f"{path}:2" in err and '"s3_adr"' in err and 'did you mean "s3_addr"?' in err, err
    path, err = config_error(tmp_path, '[http]\n\nmax_header_byte = 4096\n')
    assert f"{path}:3" in err and 'did you mean "http.max_header_bytes"?' in err, err
    path, err = config_error(tmp_path, '[htp]\nmax_headers = 10\n')
    assert f"{path}:1" in err and 'did you mean "http"?' in err, err
    path, err = config_error(tmp_path, 'frobnicate = 1\n')
    assert '"frobnicate"' in err and "did you mean" not in err, err
    # Flags and environment variables get the same help.
    _, err = config_error(tmp_path, "", "--http.max-header-byte", "4096")
    assert "--http.max-header-byte" in err and "did you mean --http.max-header-bytes?" in err, err
    # Bad values name their source.
    _, err = config_error(tmp_path, "", "--threads", "many")
    assert "--threads" in err, err
    _, err = config_error(tmp_path, "", env=clean_env(OPENLAKE_HTTP_MAX_HEADERS="3"))
    assert "OPENLAKE_HTTP_MAX_HEADERS" in err, err


def test_unknown_environment_variable_warns_and_starts(make_daemon):
    """The environment is shared with other tools (e.g. Kubernetes service
    variables), so an unknown OPENLAKE_* variable is a warning, not an error."""
    d = make_daemon(env={"OPENLAKE_S3_ADR": "127.0.0.1:1", "OPENLAKE_PORT": "tcp://10.0.0.1:80"})
    assert live(d.port)
    err = d.stderr()
    assert "ignoring unknown variable OPENLAKE_S3_ADR (did you mean OPENLAKE_S3_ADDR?)" in err, err
    assert "ignoring unknown variable OPENLAKE_PORT" in err, err


def test_missing_config_file(tmp_path):
    r = run_openlaked("--config", str(tmp_path / "nope.toml"), cwd=tmp_path)
    assert r.returncode == 2
    assert "nope.toml" in r.stderr


def test_uncreatable_data_dir_exits_2(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("x")
    r = run_openlaked("--data-dirs", str(blocker / "data"), "--threads", "1",
                      "--s3-addr", f"127.0.0.1:{conftest.free_port()}", cwd=tmp_path)
    assert r.returncode == 2, r.stderr
    assert "data dir" in r.stderr and str(blocker / "data") in r.stderr


def live(port):
    with Conn(port) as c:
        return c.request("GET", "/_openlake/health/live").status == 200


def refuses_connections(port):
    try:
        socket.create_connection(("127.0.0.1", port), timeout=2).close()
        return False
    except ConnectionRefusedError:
        return True
    except OSError:  # e.g. reset: caught in the listener's backlog as it closed
        return False


def test_precedence_env_over_flag_over_file(make_daemon):
    p_file, p_env = conftest.free_port(), conftest.free_port()
    file_cfg = f's3_addr = "127.0.0.1:{p_file}"\n'
    # File alone.
    d = make_daemon(config=file_cfg, start=False)
    i = d.args.index("--s3-addr")
    del d.args[i:i + 2]
    d.port = p_file
    d.start()
    assert live(d.port)
    d.stop()
    # File and flag: the flag wins.
    d = make_daemon(config=file_cfg)
    assert live(d.port)
    assert refuses_connections(p_file)
    d.stop()
    # File, flag and environment: the environment wins.
    d = make_daemon(config=file_cfg, env={"OPENLAKE_S3_ADDR": f"127.0.0.1:{p_env}"}, start=False)
    p_flag = d.port
    d.port = p_env
    d.start()
    assert live(d.port)
    assert refuses_connections(p_file) and refuses_connections(p_flag)


def body_limit(port):
    """Largest body the daemon accepts, probed around 100..300."""
    for n in (100, 101, 200, 201, 300, 301):
        with Conn(port) as c:
            r = c.request("PUT", "/_openlake/debug/sink", body=b"x" * n)
        if r.status == 413:
            return n - 1
        assert r.status == 200, r
    return None


def test_precedence_for_nested_keys(make_daemon):
    cfg = "[http]\nmax_body_bytes = 100\ndebug_endpoints = true\n"
    assert body_limit(make_daemon(config=cfg).port) == 100
    assert body_limit(make_daemon(config=cfg, args=["--http.max-body-bytes", "200"]).port) == 200
    assert body_limit(make_daemon(config=cfg, args=["--http.max-body-bytes", "200"],
                                  env={"OPENLAKE_HTTP_MAX_BODY_BYTES": "300"}).port) == 300


def test_deployment_config_accepted(make_daemon, tmp_path):
    d1, d2 = tmp_path / "drive1", tmp_path / "drive2"
    cfg = f"""# A node's deployment file, as an operator would write it
# (the test's flags give it one data dir).
self_id = 2
mode = "all"
transport = "tcp"
rpc_addr = "127.0.0.1:{conftest.free_port()}"
kv_addr = "127.0.0.1:{conftest.free_port()}"
region = "eu-west-1"
data_dirs = ["{d1}", "{d2}"]
set_drive_count = 1
default_parity_count = 0
log_level = "warn"

[[credentials]]
access_key = "AKIAIOSFODNN7EXAMPLE"
secret_key = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"

[[credentials]]
access_key = "backup-writer"
secret_key = "another-secret-456"

[kv_slab]
cpu_ram_frac = 0.25
capacity_gb = 0
reserve_ttl_secs = 60

[rdma]
backend = "none"
devices = ["mlx5_0:1", "mlx5_1:1"]
gid_index = 3

[http]
max_header_bytes = 32768
max_headers = 200
header_timeout_ms = 5000
idle_timeout_ms = 30000
max_connections = 1000
max_body_bytes = 0
shutdown_timeout_ms = 2000
debug_endpoints = true
"""
    d = make_daemon(config=cfg)
    with Conn(d.port) as c:
        assert c.request("GET", "/_openlake/health/ready").status == 200
        # [http] from the file is in force.
        r = c.request("PUT", "/_openlake/debug/sink", body=b"deploy")
        assert sink_json(r)[0] == 6
    d.stop()
    # a single host: the node RPC's and UCX's settings are said to do nothing
    err = d.stderr()
    assert "rpc_addr: has no effect" in err and "rdma.devices: has no effect" in err, err


def test_port_in_use_exits_2(tmp_path):
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        port = holder.getsockname()[1]
        t0 = time.time()
        r = run_openlaked("--s3-addr", f"127.0.0.1:{port}", "--threads", "2",
                          "--data-dirs", str(tmp_path / "data"), cwd=tmp_path)
    assert r.returncode == 2, (r.stdout, r.stderr)
    assert f"127.0.0.1:{port}" in r.stderr and "in use" in r.stderr, r.stderr
    assert "serving" not in r.stdout
    assert time.time() - t0 < 20
    no_sanitizer_report(r.stderr)


def test_port_held_by_another_openlaked_exits_2(make_daemon, tmp_path):
    d = make_daemon()
    p = subprocess.Popen([conftest.bin_path("openlaked"), "--s3-addr", f"127.0.0.1:{d.port}",
                          "--threads", "1", "--data-dirs", str(tmp_path / "data2")],
                         env=clean_env(), cwd=tmp_path, stdout=subprocess.DEVNULL,
                         stderr=subprocess.PIPE, text=True)
    try:
        rc = p.wait(timeout=10)
    except subprocess.TimeoutExpired:
        p.kill()
        p.wait()
        rc = None
    finally:
        p.stderr.close()
    assert rc == 2, "a second openlaked started on a port already in use"


# ---- signals and shutdown ----------------------------------------------------------------


def start_held_upload(port, hold_ms, data):
    """Opens a sink upload that the server holds for hold_ms. Returns once the
    server has the request (its 100 Continue arrived) and the body is sent."""
    c = Conn(port, timeout=30)
    c.send(build_request("PUT", f"/_openlake/debug/sink?hold_ms={hold_ms}",
                         headers=[("Expect", "100-continue"), ("Content-Length", str(len(data)))]))
    assert c.read_response(allow_100=True).status == 100
    c.send(data)
    return c


def wait_refused(port, timeout=30):
    wait_for(lambda: refuses_connections(port), timeout=timeout, what="listener closed")


def test_graceful_shutdown_finishes_in_flight_request(make_daemon):
    d = make_daemon(args=DEBUG)
    data = random.Random(9).randbytes(200_000)
    # The partial head goes first: the server has read it by the time the
    # two round trips below are done (no sleep to guess at).
    partial = Conn(d.port)
    partial.send(b"GET /_openlake/health/ready HTTP/1.1\r\n")
    idle = Conn(d.port)
    assert idle.request("GET", "/_openlake/health/live").status == 200
    t0 = time.monotonic()   # before the hold starts: the exit is at least 2.5 s later
    held = start_held_upload(d.port, 2500, data)
    d.signal(signal.SIGTERM)
    # New connections are refused; idle keep-alive connections are closed.
    wait_refused(d.port)
    idle.expect_closed(timeout=30)
    # A request whose head was arriving is answered (not ready: shutting down).
    partial.send(b"Host: x\r\n\r\n")
    r = partial.read_response()
    assert (r.status, r.body) == (503, b"shutting down\n") and r.closes, r
    partial.expect_closed()
    # The held upload completes with the right answer and Connection: close.
    r = held.read_response()
    assert sink_json(r) == (len(data), hashlib.sha256(data).hexdigest())
    assert r.closes
    held.expect_closed()
    assert d.proc.wait(timeout=30) == 0
    assert time.monotonic() - t0 >= 2.0, "exited before the held request could finish"
    d.stop(expect_rc=0)
    err = d.stderr()
    assert "shutting down" in err and "stopped" in err
    assert "shutdown timeout" not in err
    for c in (idle, partial, held):
        c.close()


def test_graceful_shutdown_streaming_download(make_daemon):
    d = make_daemon(args=DEBUG)
    n = 32 << 20
    with Conn(d.port, timeout=30) as c:
        c.send(build_request("GET", f"/_openlake/debug/source?bytes={n}"))
        first = c.read_line()
        assert first == b"HTTP/1.1 200 OK"
        d.signal(signal.SIGTERM)
        c.buf[:0] = first + b"\r\n"
        chk = PatternCheck()
        r = c.read_response(sink=chk)
        assert chk.n == n and r.status == 200
        # The header may have been sent before the drain began.
        c.expect_closed()
    assert d.proc.wait(timeout=15) == 0
    d.stop(expect_rc=0)


def test_shutdown_timeout_closes_stragglers(make_daemon):
    # The hold (120 s) outlasts every wait below: an exit within them is the
    # shutdown timeout's doing, whatever the machine's load.
    d = make_daemon(args=DEBUG + ["--http.shutdown-timeout-ms", "300"])
    held = start_held_upload(d.port, 120000, b"x" * 1000)
    held.sock.settimeout(60)
    d.signal(signal.SIGTERM)
    try:
        extra = held.sock.recv(65536)
    except ConnectionResetError:
        extra = b""
    assert extra == b"", extra
    assert d.proc.wait(timeout=60) == 0
    d.stop(expect_rc=0)
    assert "shutdown timeout" in d.stderr()
    held.close()


def test_second_signal_exits_1_at_once(make_daemon):
    d = make_daemon(args=DEBUG)
    held = start_held_upload(d.port, 120000, b"y" * 1000)
    d.signal(signal.SIGTERM)
    wait_refused(d.port)
    assert d.proc.poll() is None, "exited although a request was in flight"
    d.signal(signal.SIGINT)
    # status 1, long before the hold or the 10 s shutdown timeout (which exits 0)
    assert d.proc.wait(timeout=60) == 1
    d.stop(expect_rc=1)
    assert "second signal" in d.stderr()
    held.close()


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_signal_on_idle_daemon_exits_0(make_daemon, sig):
    d = make_daemon()
    d.signal(sig)
    assert d.proc.wait(timeout=60) == 0
    d.stop(expect_rc=0)
    assert f"signal {int(sig)}" in d.stderr()
    assert "shutdown timeout" not in d.stderr(), "an idle daemon waited for its timeout"


def test_no_thread_takes_sigterm_or_sigint(make_daemon):
    """SIGINT and SIGTERM are blocked in every thread of the daemon (the main
    thread waits for them with sigtimedwait). A thread that left them
    unblocked (the store's syncfs threads once did: they start before the
    main thread blocks them) would take a signal that arrives while the main
    thread is busy elsewhere and kill the process with the default action."""
    d = make_daemon()  # mode all: the store's threads, the loops, the healer
    # the main thread itself shows them unblocked while it sits in sigtimedwait
    tasks = [t for t in os.listdir(f"/proc/{d.proc.pid}/task") if t != str(d.proc.pid)]
    assert len(tasks) >= 3, tasks
    names = []
    for t in tasks:
        with open(f"/proc/{d.proc.pid}/task/{t}/status") as f:
            st = dict(ln.split(":\t", 1) for ln in f.read().splitlines() if ":\t" in ln)
        blocked = int(st["SigBlk"], 16)
        names.append(st["Name"])
        for sig in (signal.SIGINT, signal.SIGTERM):
            assert blocked & (1 << (int(sig) - 1)), (st["Name"], sig)
    assert any(n.startswith("ol-sync") for n in names), names


# ---- metrics ------------------------------------------------------------------------------


def test_metrics_count_requests_by_code(make_daemon):
    d = make_daemon(args=DEBUG)
    m0 = get_metrics(d.port)
    sent = received = 0

    def track(c, raw, count=1, method="GET"):
        nonlocal sent
        c.send(raw)
        sent += len(raw)
        return [c.read_response(method) for _ in range(count)]

    with Conn(d.port) as c:
        for _ in range(5):
            track(c, build_request("GET", "/_openlake/health/live"))
        for _ in range(3):
            track(c, build_request("GET", "/_openlake/nope"))
        for _ in range(2):
            track(c, build_request("GET", "/bucket/object"))
        track(c, build_request("DELETE", "/_openlake/metrics"))
        r = track(c, build_request("GET", "/_openlake/debug/source?bytes=100000"))[0]
        received += len(r.body)
    with Conn(d.port) as c:
        assert track(c, b"\x00garbage\r\n\r\n")[0].status == 400
    with Conn(d.port) as c:
        assert track(c, build_request("GET", "/", headers=[("X-Big", "b" * 20000)]))[0].status == 431
    m1 = get_metrics(d.port)

    def delta(name, **labels):
        return metric_sum(m1, name, **labels) - metric_sum(m0, name, **labels)

    # 5 live + 1 source + the first metrics request (counted once it ended).
    assert delta("openlake_http_requests_total", code=200) == 7
    assert delta("openlake_http_requests_total", code=404) == 3
    assert delta("openlake_http_requests_total", code=403) == 2   # unsigned S3 requests
    assert delta("openlake_http_requests_total", code=405) == 1
    assert delta("openlake_http_requests_total", code=400) == 1
    assert delta("openlake_http_requests_total", code=431) == 1
    assert delta("openlake_http_connections_total") == 4
    assert delta("openlake_http_received_bytes_total") >= sent
    assert delta("openlake_http_sent_bytes_total") >= received
    assert metric_sum(m1, "openlake_http_connections_rejected_total") == 0
    # Every requests_total sample has a core and a 3-digit code.
    for (name, labels) in m1:
        if name == "openlake_http_requests_total":
            ls = dict(labels)
            assert set(ls) == {"core", "code"} and re.fullmatch(r"[1-5]\d\d", ls["code"])
    # The histogram is cumulative and consistent.
    buckets = sorted(((float(dict(ls)["le"]), v) for (n, ls), v in m1.items()
                      if n == "openlake_http_request_duration_seconds_bucket"))
    assert buckets[-1][0] == float("inf")
    assert all(a[1] <= b[1] for a, b in zip(buckets, buckets[1:]))
    count = metric_sum(m1, "openlake_http_request_duration_seconds_count")
    assert buckets[-1][1] == count
    assert metric_sum(m1, "openlake_http_request_duration_seconds_sum") >= 0
    handled = 7 + 3 + 2 + 1  # answered by a handler; 400/431 may or may not be timed
    assert handled <= count - metric_sum(m0, "openlake_http_request_duration_seconds_count") <= handled + 2


# ---- abrupt and hostile clients -------------------------------------------------------------


def test_abrupt_disconnects_leave_daemon_serving(make_daemon):
    d = make_daemon(args=DEBUG)
    big = 100 << 20
    # Mid-response: a 100 MiB download dropped after ~1 MiB (FIN, RST, chunked).
    for chunked, reset in [(0, False), (0, True), (1, False), (1, True)]:
        c = Conn(d.port)
        c.send(build_request("GET", f"/_openlake/debug/source?bytes={big}&chunked={chunked}"))
        got = 0
        while got < (1 << 20):
            got += len(c.sock.recv(1 << 16))
        c.close(reset=reset)
    # Mid-body, more times than there are per-core sink states (64): a leak
    # of those would turn the next upload into 503.
    for i in range(70):
        c = Conn(d.port)
        c.send(build_request("PUT", "/_openlake/debug/sink", headers=[("Content-Length", str(10 << 20))])
               + b"z" * 65536)
        c.close(reset=i % 2 == 1)
    # Held uploads dropped while the hold timer is armed.
    for i in range(70):
        c = Conn(d.port)
        c.send(build_request("PUT", "/_openlake/debug/sink?hold_ms=200",
                             headers=[("Content-Length", "5000")]) + b"h" * 100)
        c.close(reset=i % 2 == 0)
    # Downloads dropped before a byte was read.
    for i in range(70):
        c = Conn(d.port)
        c.send(build_request("GET", "/_openlake/debug/source?bytes=%d" % (4 << 20)))
        c.close(reset=i % 2 == 0)
    # Mid-head.
    for i in range(20):
        c = Conn(d.port)
        c.send(b"GET /_openlake/health/live HTTP/1.1\r\nHost: x\r\nX-")
        c.close(reset=i % 2 == 0)
    # (an aborted request's state, hold timer included, is freed with it)
    wait_for(lambda: active_conns(d.port) == 0, timeout=60, what="connections_active back to 0")
    data = random.Random(1).randbytes(1 << 20)
    with Conn(d.port) as c:
        for _ in range(3):
            r = c.request("PUT", "/_openlake/debug/sink", body=data)
            assert sink_json(r) == (len(data), hashlib.sha256(data).hexdigest())
            r = c.request("PUT", "/_openlake/debug/sink?hold_ms=10", body=data[:1000])
            assert sink_json(r) == (1000, hashlib.sha256(data[:1000]).hexdigest())
            chk = PatternCheck()
            c.send(build_request("GET", "/_openlake/debug/source?bytes=%d" % (3 << 20)))
            assert c.read_response(sink=chk).status == 200 and chk.n == 3 << 20
    # Many concurrent uploads at once still fit in the state pool.
    conns = [Conn(d.port) for _ in range(64)]
    try:
        for c in conns:
            c.send(build_request("PUT", "/_openlake/debug/sink?hold_ms=200", body=b"q" * 10))
        for c in conns:
            assert sink_json(c.read_response())[0] == 10
    finally:
        for c in conns:
            c.close()
    d.stop()


def flood(port, rnd, n, kinds=6):
    """Opens n connections, 100 at a time, each doing one of `kinds` rude
    things, then closes them (some with RST)."""
    opened = 0
    while opened < n:
        socks = []
        for i in range(min(100, n - opened)):
            s = socket.create_connection(("127.0.0.1", port), timeout=10)
            socks.append((i % kinds, s))
            opened += 1
        for kind, s in socks:
            try:
                if kind == 1:
                    s.sendall(rnd.randbytes(rnd.randrange(1, 3000)))
                elif kind == 2:
                    s.sendall(b"GET /_openlake/health/live HTTP/1.1\r\nHost: x\r\nX-Partial: ")
                elif kind == 3:
                    s.sendall(build_request("GET", "/_openlake/health/live"))
                elif kind == 4:
                    s.sendall(build_request("PUT", "/_openlake/debug/sink",
                                            headers=[("Content-Length", str(1 << 20))])
                              + b"w" * 10000)
                elif kind == 5:
                    s.sendall(build_request("GET", "/_openlake/debug/source?bytes=%d" % (1 << 20)))
            except OSError:
                pass  # the server may have answered garbage with 400 and closed
        for kind, s in socks:
            if kind in (4, 5):
                s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, b"\x01\0\0\0\0\0\0\0")
            s.close()


def test_connection_flood_bounded_rss(make_daemon):
    # An ASan build keeps freed memory in its quarantine (256 MiB by default)
    # rather than reusing it, so its RSS grows with every flood whatever the
    # daemon's pools do: without a quarantine it reuses memory as the normal
    # build does, and every other check of ASan stays on.
    asan = os.environ.get("ASAN_OPTIONS", "")
    d = make_daemon(args=DEBUG,
                    env={"ASAN_OPTIONS": (asan + ":" if asan else "") + "quarantine_size_mb=0"})
    with Conn(d.port) as c:
        assert c.request("GET", "/_openlake/health/live").status == 200
    rss0 = d.rss_kib()
    rnd = random.Random(1234)
    rss = []
    for _ in range(2):
        flood(d.port, rnd, 1000)
        wait_for(lambda: active_conns(d.port) == 0, timeout=20,
                 what="connections_active back to 0")
        with Conn(d.port) as c:
            assert c.request("GET", "/_openlake/health/live").status == 200
            r = c.request("GET", "/_openlake/debug/source?bytes=%d" % (1 << 20))
            assert len(r.body) == 1 << 20
        rss.append(d.rss_kib())
    m = get_metrics(d.port)
    assert metric_sum(m, "openlake_http_connections_total") >= 2000
    print(f"openlaked RSS: {rss0} KiB before, {rss[0]} KiB after 1000 connections, "
          f"{rss[1]} KiB after 2000")
    # Memory comes from pools sized at start-up (default limits: up to 64 MiB
    # of output buffers plus connection and head-staging slots), so a flood
    # may touch pool pages but a second one must not grow RSS further.
    assert rss[0] - rss0 < 256 * 1024, (rss0, rss)
    assert rss[1] - rss[0] < 16 * 1024, (rss0, rss)
    d.stop()
