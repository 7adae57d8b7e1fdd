"""Shared fixtures for the black-box tests: real openlaked processes.

Each daemon gets free loopback ports and a private temporary data directory,
and is stopped with SIGTERM at the end of the test; a daemon that does not
exit 0, or whose stderr carries a sanitizer report, fails the test.

OPENLAKE_BIN_DIR picks the build to test (default: build; make test runs the
suite against build/asan too).
"""
import os
import signal
import socket
import subprocess
import time
import urllib.error
import urllib.request

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def bin_dir():
    d = os.environ.get("OPENLAKE_BIN_DIR", "build")
    return d if os.path.isabs(d) else os.path.join(ROOT, d)


def bin_path(name):
    return os.path.join(bin_dir(), name)


_GIVEN = set()   # every port free_ports handed out in this process


def free_ports(n):
    """n distinct free loopback ports (all held bound until each is chosen),
    none handed out before in this process: a port chosen for one flag and
    released is free again, and the kernel may give it to the next call
    (a node's --rpc-addr and then its kv_addr once collided that way)."""
    socks, held = [], []           # chosen; seen before (held so not bound again)
    try:
        while len(socks) < n:
            s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            s.bind(("127.0.0.1", 0))
            (held if s.getsockname()[1] in _GIVEN else socks).append(s)
            assert len(held) < 512, "free_ports: the loopback ports are all handed out"
        ports = [s.getsockname()[1] for s in socks]
        _GIVEN.update(ports)
        return ports
    finally:
        for s in socks + held:
            s.close()


def free_port():
    return free_ports(1)[0]


# A sanitizer report, or an OL_ASSERT that fired (base/assert.h: on in the
# ASan build), fails the test even where the daemon was meant to die.
SANITIZER_MARKERS = ("ERROR: AddressSanitizer", "ERROR: LeakSanitizer", "runtime error:",
                     "UndefinedBehaviorSanitizer", ": assertion failed: ")


class Daemon:
    """One openlaked process. Use start()/stop() or the `daemon` fixture."""

    def __init__(self, tmp_path, args=(), env=None, config=None, threads=1):
        self.tmp = tmp_path
        self.port, self.kv_port = free_ports(2)
        self.data = tmp_path / "data"
        self.args = ["--s3-addr", f"127.0.0.1:{self.port}", "--kv-addr", f"127.0.0.1:{self.kv_port}",
                     "--kv-slab.capacity-gb", "0.25", "--data-dirs", str(self.data),
                     "--threads", str(threads), *args]
        if config is not None:
            cfg = tmp_path / "openlake.toml"
            cfg.write_text(config)
            self.args = ["--config", str(cfg), *self.args]
        # Our own variables (OPENLAKE_BIN_DIR) are not daemon settings.
        self.env = {k: v for k, v in os.environ.items() if not k.startswith("OPENLAKE_")}
        self.env.update(env or {})
        self.proc = None
        self.stderr_path = tmp_path / f"openlaked-{self.port}.stderr"
        self.ssl_context = None   # set for a daemon serving TLS (https url)
        self.host = "127.0.0.1"   # where its S3 listener is reached
        self.wrap = []            # a command prefix, e.g. ["ip", "netns", "exec", NS]

    @property
    def url(self):
        scheme = "https" if self.ssl_context else "http"
        return f"{scheme}://{self.host}:{self.port}"

    def start(self, wait=True):
        self._err = open(self.stderr_path, "w")
        self.proc = subprocess.Popen([*self.wrap, bin_path("openlaked"), *self.args], cwd=self.tmp,
                                     env=self.env, stdout=subprocess.PIPE,
                                     stderr=self._err, text=True)
        if wait:
            self.wait_ready()
        return self

    def wait_ready(self, timeout=60):
        deadline = time.time() + timeout
        while time.time() < deadline:
            if self.proc.poll() is not None:
                raise AssertionError(f"openlaked exited {self.proc.returncode}: {self.stderr()}")
            try:
                with urllib.request.urlopen(self.url + "/_openlake/health/ready", timeout=1,
                                            context=self.ssl_context) as r:
                    if r.status == 200:
                        return
            except OSError:
                pass
            time.sleep(0.05)
        raise AssertionError("openlaked did not become ready: " + self.stderr())

    def hold_ready(self, hold=True):
        """Holds the daemon not ready, as while it starts (health/ready 503, KV
        HELLO BUSY "starting; retry"), or lets it go. Needs
        --http.debug-endpoints (POST /_openlake/debug/ready?hold=1|0)."""
        req = urllib.request.Request(f"{self.url}/_openlake/debug/ready?hold={int(hold)}",
                                     method="POST")
        with urllib.request.urlopen(req, timeout=10, context=self.ssl_context) as r:
            assert r.read().startswith(b"held" if hold else b"free")

    def hello_busy(self):
        """KV HELLOs the daemon answered BUSY "starting; retry" so far."""
        with urllib.request.urlopen(self.url + "/_openlake/debug/ready", timeout=10,
                                    context=self.ssl_context) as r:
            return int(r.read().split(b"hello_busy ")[1])

    def is_ready(self):
        """GET /_openlake/health/ready answers 200 (503, or no listener yet:
        False)."""
        try:
            with urllib.request.urlopen(self.url + "/_openlake/health/ready", timeout=10,
                                        context=self.ssl_context) as r:
                return r.status == 200
        except urllib.error.HTTPError as e:
            assert e.code == 503, e
            return False
        except OSError:
            return False

    def stderr(self):
        try:
            return self.stderr_path.read_text()
        except OSError:
            return ""

    def pid(self):
        return self.proc.pid

    def rss_kib(self):
        with open(f"/proc/{self.proc.pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
        return 0

    def signal(self, sig):
        self.proc.send_signal(sig)

    def stop(self, timeout=30, expect_rc=0):
        if self.proc is None or self.proc.poll() is not None:
            rc = self.proc.returncode if self.proc else None
        else:
            self.proc.send_signal(signal.SIGTERM)
            try:
                rc = self.proc.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
                raise AssertionError("openlaked did not exit within %ss of SIGTERM" % timeout)
        if self.proc is not None and self.proc.stdout:
            self.proc.stdout.close()
        self._err.close()
        err = self.stderr()
        for marker in SANITIZER_MARKERS:
            assert marker not in err, f"sanitizer report from openlaked:\n{err}"
        if expect_rc is not None:
            assert rc == expect_rc, f"openlaked exited {rc}, stderr:\n{err}"
        return rc


@pytest.fixture
def make_daemon(tmp_path):
    """Factory: make_daemon(args=[...], env={...}, config="toml", threads=1)."""
    made = []

    def factory(*args, start=True, **kw):
        sub = tmp_path / f"d{len(made)}"
        sub.mkdir()
        d = Daemon(sub, *args, **kw)
        made.append(d)
        return d.start() if start else d

    yield factory
    errors = []
    for d in made:
        if d.proc is not None and d.proc.returncode is None:
            try:
                d.stop()
            except AssertionError as e:
                errors.append(str(e))
    if errors:
        raise AssertionError("\n".join(errors))


@pytest.fixture
def daemon(make_daemon):
    """A running daemon with debug endpoints on and short test timeouts."""
    return make_daemon(args=["--http.debug-endpoints", "true"])


def raw_request(port, data, timeout=10, read_until_close=True):
    """Sends raw bytes, returns everything received until close (or timeout)."""
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as s:
        s.sendall(data)
        chunks = []
        if read_until_close:
            while True:
                try:
                    b = s.recv(65536)
                except (ConnectionResetError, socket.timeout):
                    break
                if not b:
                    break
                chunks.append(b)
        return b"".join(chunks)


@pytest.fixture(autouse=True, scope="session")
def per_user_data_dir_in_tmp(tmp_path_factory):
    """An openlaked or openlake started with no data dir named and no ./data
    uses the per-user one, $XDG_DATA_HOME/openlake (src/base/datadir.h): here
    under a temp dir, never the real ~/.local/share of whoever runs the tests."""
    os.environ["XDG_DATA_HOME"] = str(tmp_path_factory.mktemp("xdg-data-home"))
