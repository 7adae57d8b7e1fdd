"""Helpers for driving the fault hook of a test build (src/base/fault.h,
docs/testing.md): whether the build under test has it, and the admin
debug endpoint that reads and replaces the rules.

Only the ASan build defines OL_FAULTS (Makefile DEFS); the tests that need
it skip elsewhere, so `make test` runs them once.
"""
import json
import subprocess
import urllib.error
import urllib.request

from conftest import bin_path

ENV = "OPENLAKE_FAULTS"


def build_has_faults():
    """True when the openlake binaries under test were built with OL_FAULTS."""
    try:
        out = subprocess.run([bin_path("openlake"), "version", "--json"], capture_output=True,
                             text=True, timeout=60).stdout
        return "-DOL_FAULTS" in json.loads(out).get("build_flags", "")
    except (OSError, ValueError, subprocess.SubprocessError):
        return False


SKIP_REASON = "needs a test build with fault injection (OL_FAULTS: make asan)"


def get(d):
    """The rules in force and the counts: {"injected": {...}, "rules": [...]}."""
    with urllib.request.urlopen(d.url + "/_openlake/debug/faults", timeout=10) as r:
        return json.loads(r.read())


def post(d, spec):
    """Replaces the rules by spec ("" clears them). Returns (status, body)."""
    req = urllib.request.Request(d.url + "/_openlake/debug/faults", data=spec.encode(),
                                 method="POST")
    try:
        with urllib.request.urlopen(req, timeout=10) as r:
            return r.status, r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode()


def injected(d, module="store"):
    return get(d)["injected"][module]
