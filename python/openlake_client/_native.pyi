from typing import Any, Sequence

from typing_extensions import Buffer

OK: int
EXISTS: int
NOT_FOUND: int
NOSPACE: int
TOO_LARGE: int
CHECKSUM_MISMATCH: int

Key = bytes | str

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
    def close(self) -> None: ...
    def __enter__(self) -> "Client": ...
    def __exit__(self, *exc: Any) -> None: ...
