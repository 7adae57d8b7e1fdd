"""openlake_client: the Python client of the OpenLake KV cache.

    from openlake_client import Client
    with Client("/path/to/data/kv.sock", token_file="/path/to/data/kv.token",
                namespace="llama-3-8b/bf16", value_size=1 << 20) as c:
        c.put([b"blk-0"], [array])            # any buffer: bytes, numpy, torch CPU tensor
        present, leading = c.exists([b"blk-0", b"blk-1"])
        c.get([b"blk-0"], [out])              # into a writable buffer

Zero copy over the Unix socket: reserve slots in the server's shared memory,
write them in place, publish; pin values and read them in place:

        slots = c.reserve([b"blk-1"], size=n)  # one Slot per key; .status OK = held
        np.frombuffer(slots[0].view, np.uint8)[:] = src   # or slots[0].view[:n] = data
        c.commit(slots)                        # BufferError while a view is still alive
        (s,) = c.acquire([b"blk-1"])           # s.view is read-only, s.len bytes
        ...                                    # never evicted or reused while pinned
        c.release([s])

The work is done by a C extension over the OpenLake C client
(include/openlake/client.h): one connection per server shard, values through
the server's shared memory over the Unix socket or inline over TCP, every
value checked with xxh3, and the GIL released during I/O and copies.

In a cluster, c.members() says which nodes hold the KV pool and
Placement(members).homes(namespace, keys, r) gives each key's home nodes,
computed by the nodes' own placement code (docs/cluster.md "Placement").
"""
from ._native import (BUSY, CHECKSUM_MISMATCH, EXISTS, NOSPACE, NOT_FOUND, OK, PINNED, QUOTA,
                      STALE_GENERATION, TOO_LARGE, Client, Placement, Slot, __version__,
                      place_log2_q32)

__all__ = ["__version__", "Client", "Slot", "Placement", "place_log2_q32", "OK", "EXISTS", "NOT_FOUND", "NOSPACE", "BUSY", "PINNED",
           "STALE_GENERATION", "TOO_LARGE", "QUOTA", "CHECKSUM_MISMATCH"]
