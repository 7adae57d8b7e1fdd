"""Builds openlake_client._native from the repository's C client.

The extension compiles the C client (src/client/client.c) and the wire
codec (src/kv/proto.c) from the repository this package sits in, and links
Debian's ISA-L and xxhash (installed by scripts/deps.sh).
"""
import os

from setuptools import Extension, setup

here = os.path.dirname(os.path.abspath(__file__))
root = os.path.dirname(here)


def rel(*p):
    return os.path.relpath(os.path.join(root, *p), here)


setup(
    ext_modules=[
        Extension(
            "openlake_client._native",
            sources=["src/_native.c", rel("src", "client", "client.c"), rel("src", "kv", "proto.c"),
                     rel("src", "kv", "slab.c")],
            include_dirs=[rel("include"), rel("src")],
            libraries=["isal", "xxhash", "pthread"],
            extra_compile_args=["-std=c17", "-D_GNU_SOURCE", "-O2", "-Wall", "-Wextra",
                                "-Wno-unused-parameter", "-Wno-missing-field-initializers"],
        )
    ]
)
