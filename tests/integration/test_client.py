"""The C client library (src/client) against a real daemon with two shards:
runs build/client_tests (tests/client/test_client.c) with the daemon's
addresses and checks every C test passed. The driver also restarts the
daemon when the reconnect test asks for it over a pipe."""
import json
import os
import subprocess
import threading

import conftest
from test_kv import poll


def test_c_client_against_daemon(make_daemon):
    d = make_daemon(threads=2)
    req_r, req_w = os.pipe()
    ack_r, ack_w = os.pipe()
    env = dict(os.environ,
               OL_TEST_KV_SOCK=str(d.data / "kv.sock"),
               OL_TEST_KV_TCP=f"127.0.0.1:{d.kv_port}",
               OL_TEST_KV_TOKEN_FILE=str(d.data / "kv.token"),
               OL_TEST_CTL_REQ=str(req_w), OL_TEST_CTL_ACK=str(ack_r))

    def restarter():
        if os.read(req_r, 1):  # the C test asks for a restart
            d.stop()
            d.start()
            os.write(ack_w, b"k")

    t = threading.Thread(target=restarter, daemon=True)
    t.start()
    r = subprocess.run([conftest.bin_path("client_tests")], env=env, capture_output=True,
                       text=True, timeout=180, pass_fds=(req_w, ack_r))
    for fd in (req_w, ack_r):
        os.close(fd)
    t.join(30)
    for fd in (req_r, ack_w):
        os.close(fd)
    print(r.stdout)
    assert r.returncode == 0, r.stdout + r.stderr
    last = r.stdout.strip().splitlines()[-1]
    # every test ran but the UCX one (its daemon: test_kv_ucx.py)
    assert last.startswith("unit: ") and " 0 failed, 1 skipped" in last, last
    assert "SKIP client_ucx_strangers_are_dropped" in r.stdout, r.stdout


def test_c_client_open_retries_busy_until_the_daemon_is_ready(make_daemon):
    """ol_client_open while the daemon is not ready (held so here, as while
    it starts): each HELLO answered BUSY "starting; retry" is said again
    until the daemon is ready. `openlake kv stats` is a C client (timeout
    10 s: the hold is let go well within it)."""
    d = make_daemon(threads=2, args=["--http.debug-endpoints", "true"])
    d.hold_ready()
    env = {k: v for k, v in os.environ.items() if not k.startswith("OPENLAKE_")}
    p = subprocess.Popen([conftest.bin_path("openlake"), "--json", "kv", "stats", "--addr",
                          str(d.data / "kv.sock")], env=env, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True)
    try:
        assert poll(lambda: d.hello_busy() >= 2 or p.poll() is not None, 60)
        assert p.poll() is None, "the C client gave up on BUSY: " + p.communicate()[1]
        d.hold_ready(False)
        out, err = p.communicate(timeout=60)
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
    assert p.returncode == 0, err
    assert json.loads(out)["shards"] == 2
