"""Builds the openlake-vllm package: the extension openlake_client._native and
the openlaked and openlake binaries, from the C sources beside this file (a
checkout, or the sdist, which carries them: MANIFEST.in).

- The extension compiles the C client (src/client/client.c), the wire codec
  (src/kv/proto.c) and the slab helpers (src/kv/slab.c) with the extension's
  own glue (python/src/_native.c), and links ISA-L and xxhash.
- UCX (ucx://host:port addresses, src/client/ucx_link.c): where pkg-config
  finds ucx at build time, the extension is compiled with its headers
  (OL_HAVE_UCX) but never linked to it: libucp.so.0 is dlopen'ed when a
  ucx:// client first opens, so the wheel carries no UCX (auditwheel would
  copy libucp in without the transport plugins it loads) and a host's own
  UCX is used; a host without it gets a clear error for ucx:// only.
- Built by CPython 3.11 or newer, the extension keeps to the limited API of
  3.11 (Py_LIMITED_API 0x030b0000: the stable ABI) and the wheel is tagged
  cp311-abi3, so one wheel serves every CPython from 3.11 on. 3.9 and 3.10
  (requires-python is >= 3.9) get an ordinary version-specific build of the
  same source: the buffer protocol _native.c needs is limited API only from
  3.11.
- The binaries are the Makefile's (make B=build/pkg build/pkg/openlaked
  build/pkg/openlake): they need the libraries the Makefile links (liburing,
  ISA-L, OpenSSL, xxhash, expat: docs/packaging.md names the packages). They
  go into the package as openlake_client/bin/, which the console scripts
  openlaked and openlake run (openlake_client/_bin.py); debug info stripped;
  built without -Werror (WERROR=): a user's newer compiler may warn more.
- The version is the Makefile's VERSION, the one place it is set: it is the
  package's version, openlake_client.__version__ (the extension gets it as
  OL_VERSION, as the binaries do) and what `openlake version` prints.
"""
import glob
import os
import re
import shutil
import subprocess
import sys

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext
from setuptools.command.build_py import build_py

ROOT = os.path.dirname(os.path.abspath(__file__))


def makefile_version():
    with open(os.path.join(ROOT, "Makefile")) as f:
        m = re.search(r"^VERSION\s*:=\s*(\S+)\s*$", f.read(), re.M)
    if not m:
        raise RuntimeError("Makefile: no VERSION := line")
    return m.group(1)


VERSION = makefile_version()
BINARIES = ("openlaked", "openlake")
LIMITED_API = sys.version_info >= (3, 11)   # see the docstring


def ucx_include_dirs():
    """UCX's include dirs (pkg-config --cflags-only-I ucx), or None without
    UCX. Only its headers: the extension loads libucp at run time."""
    try:
        r = subprocess.run(["pkg-config", "--cflags-only-I", "ucx"], capture_output=True,
                           text=True, check=True)
    except (OSError, subprocess.CalledProcessError):
        return None
    return [f[2:] for f in r.stdout.split() if f.startswith("-I")]


UCX_INCLUDE = ucx_include_dirs()


class build_py_with_binaries(build_py):
    """build_py, then the Makefile's openlaked and openlake into the package."""

    def run(self):
        super().run()
        b = os.path.join("build", "pkg")
        cmd = ["make", "-C", ROOT, f"-j{os.cpu_count() or 1}", f"B={b}", "WERROR="]
        if not os.path.exists(os.path.join(ROOT, ".git")):   # a file in a worktree
            cmd.append("GIT=sdist")      # not a checkout: no commit to name
        cmd += [f"{b}/{name}" for name in BINARIES]
        self.announce("building the binaries: " + " ".join(cmd), level=2)
        subprocess.run(cmd, check=True)
        out = os.path.join(self.build_lib, "openlake_client", "bin")
        os.makedirs(out, exist_ok=True)
        for name in BINARIES:
            dst = os.path.join(out, name)
            shutil.copyfile(os.path.join(ROOT, b, name), dst)
            subprocess.run(["strip", "--strip-debug", dst], check=True)
            os.chmod(dst, 0o755)


class build_ext_alone(build_ext):
    """build_ext, then any other _native*.so an earlier build left beside the
    one just built is removed (a version-specific one from before the abi3
    build, another CPython's): the wheel takes everything in the build dir,
    and Python imports a version-specific extension before an abi3 one."""

    def run(self):
        super().run()
        for ext in self.extensions:
            built = self.get_ext_fullpath(ext.name)
            d, stem = os.path.dirname(built), ext.name.rsplit(".", 1)[-1] + "."
            for f in os.listdir(d):
                p = os.path.join(d, f)
                if f.startswith(stem) and f.endswith(".so") and p != built:
                    os.remove(p)


setup(
    version=VERSION,
    cmdclass={"build_py": build_py_with_binaries, "build_ext": build_ext_alone},
    ext_modules=[
        Extension(
            "openlake_client._native",
            sources=["python/src/_native.c", "src/client/client.c", "src/kv/proto.c",
                     "src/kv/slab.c", "src/base/crc32c.c",
                     "src/cluster/place.c", "src/client/ucx_link.c"],
            include_dirs=["include", "src"] + (UCX_INCLUDE or []),
            # rebuilt when a header or the Makefile (VERSION) changes, not
            # only a .c (an in-tree pip install . after an edit)
            depends=sorted(glob.glob("src/**/*.h", recursive=True) +
                           glob.glob("include/**/*.h", recursive=True)) + ["Makefile"],
            define_macros=[("OL_VERSION", f'"{VERSION}"')] +
                          ([("OL_HAVE_UCX", "1")] if UCX_INCLUDE is not None else []) +
                          ([("Py_LIMITED_API", "0x030b0000")] if LIMITED_API else []),
            py_limited_api=LIMITED_API,
            # dl: dlopen, in libc itself only from glibc 2.34
            libraries=["isal", "xxhash", "pthread", "dl"],
            extra_compile_args=["-std=c17", "-D_GNU_SOURCE", "-O2", "-Wall", "-Wextra",
                                "-Wno-unused-parameter", "-Wno-missing-field-initializers"],
        )
    ],
    options={"bdist_wheel": {"py_limited_api": "cp311"}} if LIMITED_API else {},
)
