"""openlake_client: the Python client of the OpenLake KV cache.

    from openlake_client import Client
    with Client("/path/to/data/kv.sock", token_file="/path/to/data/kv.token",
                namespace="llama-3-8b/bf16", value_size=1 << 20) as c:
        c.put([b"blk-0"], [array])            # any buffer: bytes, numpy, torch CPU tensor
        present, leading = c.exists([b"blk-0", b"blk-1"])
        c.get([b"blk-0"], [out])              # into a writable buffer

The work is done by a C extension over the OpenLake C client
(include/openlake/client.h): one connection per server shard, values through
the server's shared memory over the Unix socket or inline over TCP, every
value checked with xxh3, and the GIL released during I/O and copies.
"""
from ._native import (CHECKSUM_MISMATCH, EXISTS, NOSPACE, NOT_FOUND, OK, TOO_LARGE,
                      Client)

__all__ = ["Client", "OK", "EXISTS", "NOT_FOUND", "NOSPACE", "TOO_LARGE", "CHECKSUM_MISMATCH"]
