from typing import Any, Sequence

from typing_extensions import Buffer

__version__: str
OK: int
EXISTS: int
NOT_FOUND: int
NOSPACE: int
BUSY: int
PINNED: int
STALE_GENERATION: int
TOO_LARGE: int
QUOTA: int
CHECKSUM_MISMATCH: int

Key = bytes | str

class Slot(Buffer):
    """A reservation (Client.reserve) or a pin (Client.acquire) of one key's slot in the
    server's shared memory. Exports the slot's bytes through the buffer protocol.

    While any view of it is alive (a memoryview from .view, or an array made from one),
    commit/abort/release and Client.close raise BufferError: Python never touches the
    bytes after the server may reuse them."""

    @property
    def view(self) -> memoryview:
        """A new memoryview of the slot's len bytes: writable for a reservation, read-only
        for an acquired slot. ValueError once the slot holds nothing."""
    @property
    def key(self) -> bytes: ...
    @property
    def len(self) -> int:
        """Reservation: the size asked for (what commit publishes by default). Acquired:
        the value's length. After commit: the length published."""
    @property
    def capacity(self) -> int:
        """Bytes the slot can hold."""
    @property
    def checksum(self) -> int:
        """xxh3-64 of the value (acquired, or after commit)."""
    @property
    def status(self) -> int:
        """The status reserve/acquire gave this key: OK when it was granted."""
    @property
    def held(self) -> bool:
        """True while the slot holds a reservation or a pin."""
    @property
    def readonly(self) -> bool:
        """True for an acquired slot."""
    def verify(self) -> bool:
        """Acquired slot: the pin is still held and the bytes match their checksum."""
    def __buffer__(self, flags: int, /) -> memoryview: ...

class Client:
    """A connection to an OpenLake KV service (one socket per server shard)."""

    shards: int
    shared_memory: bool

    def __init__(self, addr: str, token: str | None = None, namespace: str = "default",
                 token_file: str | None = None, value_size: int = 0, timeout_ms: int = 0) -> None: ...
    def exists(self, keys: Sequence[Key]) -> tuple[list[bool], int]:
        """Presence per key and the length of the leading run of hits."""
    def put(self, keys: Sequence[Key], values: Sequence[Buffer]) -> list[int]:
        """Stores each value; per key a status (OK, EXISTS, NOSPACE, TOO_LARGE...)."""
    def get(self, keys: Sequence[Key], buffers: Sequence[Buffer]) -> list[int]:
        """Reads each value into its writable buffer; per key the length read or -status."""
    def delete(self, keys: Sequence[Key]) -> list[int]: ...
    def reset(self) -> int: ...
    def stats(self) -> dict[str, int]: ...
    def members(self) -> tuple[int, int, list[tuple[int, int, str]]]:
        """(revision, replicas, [(id, weight, kv_addr)]): the cluster's KV members as the
        node places keys; replicas 0 and no members: the node is in no cluster. A server
        that sends a kv_addr that is not UTF-8 (or holds a NUL) breaks the protocol:
        OSError with errno EPROTO, naming the member and its bytes."""
    def populate(self, max_bytes: int = 0) -> None:
        """Fills this process's page tables for the first max_bytes of the server's slab
        (0: all) now, instead of on first use (Unix socket only)."""
    def reserve(self, keys: Sequence[Key], size: int) -> list[Slot]:
        """A writable slot per key (Unix socket only): slot.status OK, or EXISTS, NOSPACE,
        TOO_LARGE...; size 0 means the whole slot. Write into slot.view, then commit/abort."""
    def commit(self, slots: Sequence[Slot], lens: Sequence[int] | None = None) -> list[int]:
        """Publishes reserved slots (lens: bytes written, default each slot's len); per slot
        OK, STALE_GENERATION or TOO_LARGE (still reserved)."""
    def abort(self, slots: Sequence[Slot]) -> list[int]:
        """Gives reserved slots back unpublished; per slot OK or STALE_GENERATION."""
    def acquire(self, keys: Sequence[Key]) -> list[Slot]:
        """Pins each value for reading in place (Unix socket only): slot.status OK,
        NOT_FOUND, BUSY or CHECKSUM_MISMATCH."""
    def release(self, slots: Sequence[Slot]) -> list[int]:
        """Unpins acquired slots; per slot OK or STALE_GENERATION."""
    def close(self) -> None: ...
    def __enter__(self) -> "Client": ...
    def __exit__(self, *exc: Any) -> None: ...


class Placement:
    """A placement snapshot of KV members (weighted rendezvous hashing, the nodes' code)."""

    count: int
    revision: int

    def __init__(self, members: Sequence[tuple[int, int] | tuple[int, int, str]],
                 revision: int = 0) -> None: ...
    def homes(self, namespace: str | bytes, keys: Sequence[Key], r: int = 1) -> list[tuple[int, ...]]:
        """Per key the ids of its r homes, best first."""

def place_log2_q32(x: int) -> int: ...
