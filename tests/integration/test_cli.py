"""Black-box tests of the `openlake` CLI shell: help, version, usage errors.

The binary is $OPENLAKE_BIN_DIR/openlake (default: build/openlake); a
relative OPENLAKE_BIN_DIR is taken from the repository root, so the tests
run the same from any working directory.
"""
import json
import os
import pty
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
BIN_DIR = Path(os.environ.get("OPENLAKE_BIN_DIR", "build"))
OPENLAKE = (BIN_DIR if BIN_DIR.is_absolute() else REPO / BIN_DIR) / "openlake"

# Every key the io_uring object must carry (see src/rt/probe.h).
IO_URING_KEYS = {
    "kernel", "io_uring_disabled", "setup_error", "available",
    "setup_single_issuer", "setup_defer_taskrun", "setup_coop_taskrun",
    "setup_taskrun_flag", "setup_submit_all", "op_msg_ring", "op_send_zc",
    "op_sendmsg_zc", "multishot_accept", "multishot_recv", "multishot_trial",
    "provided_buffer_rings", "registered_buffers", "op_openat", "op_statx",
    "op_renameat", "op_fsync", "op_read", "op_write", "feat_nodrop",
    "feat_fast_poll", "feat_ext_arg",
}


def run(*args, env=None):
    if not OPENLAKE.exists():
        pytest.fail(f"{OPENLAKE} not built (set OPENLAKE_BIN_DIR)")
    return subprocess.run([str(OPENLAKE), *args], capture_output=True,
                          text=True, timeout=30, env=env)


def run_on_tty(*args, env=None):
    """Runs openlake with stdout on a pseudo-terminal; returns (rc, output)."""
    master, slave = pty.openpty()
    try:
        p = subprocess.Popen([str(OPENLAKE), *args], stdout=slave,
                             stderr=subprocess.DEVNULL, env=env)
        os.close(slave)
        chunks = []
        while True:
            try:
                data = os.read(master, 4096)
            except OSError:  # EIO: the child closed its end
                break
            if not data:
                break
            chunks.append(data)
        return p.wait(timeout=30), b"".join(chunks).decode()
    finally:
        os.close(master)


def command_names():
    r = run("help", "--json")
    assert r.returncode == 0, r.stderr
    return [c["name"] for c in json.loads(r.stdout)]


def test_help_lists_commands():
    r = run("--help")
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith("usage: openlake")
    lines = r.stdout.splitlines()
    commands = lines[lines.index("Commands:") + 1:]
    listed = [ln.split()[0] for ln in commands[:commands.index("")]]
    assert "help" in listed and "version" in listed
    assert "Exit status" in r.stdout
    # `openlake help` and `openlake -h` are the same listing.
    assert run("help").stdout == r.stdout
    assert run("-h").stdout == r.stdout


def test_help_json_is_an_array_of_commands():
    r = run("help", "--json")
    assert r.returncode == 0, r.stderr
    cmds = json.loads(r.stdout)
    assert isinstance(cmds, list)
    assert {"help", "version"} <= {c["name"] for c in cmds}
    for c in cmds:
        assert set(c) == {"name", "summary"}
        assert c["summary"]


def test_every_command_has_help():
    for name in command_names():
        for args in ([name, "--help"], [name, "-h"], ["help", name]):
            r = run(*args)
            assert r.returncode == 0, (args, r.stderr)
            assert r.stdout.startswith(f"usage: openlake {name}"), args
            assert r.stderr == ""


def test_version_help():
    r = run("version", "--help")
    assert r.returncode == 0
    assert r.stdout.startswith("usage: openlake version")
    assert "--json" in r.stdout


@pytest.mark.parametrize("args", [["version", "--json"], ["--json", "version"]])
def test_version_json(args):
    r = run(*args)
    assert r.returncode == 0, r.stderr
    v = json.loads(r.stdout)
    assert {"version", "commit", "io_uring", "build_flags", "compiler", "ucx"} <= set(v)
    assert isinstance(v["version"], str) and v["version"]
    assert isinstance(v["commit"], str) and v["commit"]
    assert isinstance(v["ucx"], bool)
    u = v["io_uring"]
    assert IO_URING_KEYS <= set(u)
    assert isinstance(u["available"], bool)
    if u["available"]:
        assert u["setup_error"] is None
    else:
        assert isinstance(u["setup_error"], str)
        assert not any(u[k] for k in IO_URING_KEYS if isinstance(u[k], bool))
    if u["setup_defer_taskrun"]:
        assert u["setup_single_issuer"]
    if u["multishot_recv"]:
        assert u["provided_buffer_rings"]


def test_version_human_matches_json():
    v = json.loads(run("version", "--json").stdout)
    r = run("version")
    assert r.returncode == 0, r.stderr
    rows = dict(ln.split(None, 1) for ln in r.stdout.splitlines()
                if " " in ln.strip())
    assert rows["version"] == v["version"]
    assert rows["commit"] == v["commit"]
    assert "io_uring:" in r.stdout.splitlines()
    for key in IO_URING_KEYS - {"setup_error"}:
        assert f"\n  {key} " in r.stdout, key
    assert rows["available"] == ("yes" if v["io_uring"]["available"] else "no")
    # --version is the same command.
    assert run("--version").stdout == r.stdout


def test_unknown_command_suggests():
    r = run("verison")
    assert r.returncode == 2
    assert r.stdout == ""
    assert "unknown command 'verison'" in r.stderr
    assert "did you mean 'version'?" in r.stderr
    assert "openlake --help" in r.stderr


def test_unknown_command_without_suggestion():
    r = run("frobnicate")
    assert r.returncode == 2
    assert "unknown command 'frobnicate'" in r.stderr
    assert "did you mean" not in r.stderr


def test_usage_errors_exit_2():
    r = run("version", "--jsn")
    assert r.returncode == 2
    assert "did you mean '--json'?" in r.stderr
    assert "openlake version --help" in r.stderr
    r = run("--no-colour", "version")
    assert r.returncode == 2
    assert "did you mean '--no-color'?" in r.stderr
    r = run("version", "extra")
    assert r.returncode == 2
    assert "unexpected argument 'extra'" in r.stderr
    r = run("help", "nosuch")
    assert r.returncode == 2
    r = run()
    assert r.returncode == 2
    assert "no command given" in r.stderr


def test_write_error_exits_1():
    with open("/dev/full", "w") as full:
        p = subprocess.run([str(OPENLAKE), "version"], stdout=full,
                           stderr=subprocess.PIPE, text=True, timeout=30)
    assert p.returncode == 1
    assert "writing output" in p.stderr


def test_color_only_on_a_terminal_and_when_allowed():
    env = {k: v for k, v in os.environ.items() if k != "NO_COLOR"}
    env["TERM"] = "xterm"
    rc, out = run_on_tty("help", env=env)
    assert rc == 0 and "\x1b[" in out
    rc, out = run_on_tty("--no-color", "help", env=env)
    assert rc == 0 and "\x1b[" not in out
    rc, out = run_on_tty("help", env={**env, "NO_COLOR": "1"})
    assert rc == 0 and "\x1b[" not in out
    # Not a terminal: never colour.
    assert "\x1b[" not in run("help", env=env).stdout
