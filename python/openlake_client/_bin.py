"""The console scripts openlaked and openlake: each runs the binary of the same
name that the package carries in openlake_client/bin/ (setup.py builds them
with the Makefile), replacing this Python process (same pid, signals go
straight to it), with the same arguments.

openlaked with no --config and no data_dirs anywhere keeps its data in ./data
where that directory exists, else in $XDG_DATA_HOME/openlake
(~/.local/share/openlake): the daemon's own rule (src/base/datadir.h), which
`openlake kv` and the vLLM connector follow to find its socket.
"""
import os
import sys

BIN_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "bin")


def _run(name: str) -> None:
    path = os.path.join(BIN_DIR, name)
    if not os.access(path, os.X_OK):
        sys.stderr.write(
            f"{name}: this install of openlake-vllm has no {path}: it was built without "
            f"its binaries (install the wheel, or build the sdist with make and the C "
            f"libraries of docs/packaging.md)\n")
        sys.exit(127)
    os.execv(path, [name, *sys.argv[1:]])


def openlaked() -> None:
    _run("openlaked")


def openlake() -> None:
    _run("openlake")
