"""The connector's OpenLake clients: one per node, created lazily, reconnected
with a backoff, batches cut under the server's per-call key limit. Every
method answers safely (miss, dropped, failed) when the store is down and
logs one warning per 30 s: the engine never sees an exception from here."""

from __future__ import annotations

import logging
import time
from typing import Any

from .config import OpenLakeConfig, _resolve_addrs

logger = logging.getLogger("vllm.openlake_connector")

_KEYS_PER_CALL = 4096          # keys per client call: under the server's 8192/shard
_WARN_EVERY_S = 30.0           # one store-down warning per this many seconds


class _Store:
    """The OpenLake client(s) of one connector role.  Every method returns a
    safe answer (miss, dropped, failed) when the store is down."""

    def __init__(self, cfg: OpenLakeConfig, namespace: str, value_size: int, who: str):
        self._cfg, self._ns, self._value_size, self._who = cfg, namespace, value_size, who
        self._addrs = _resolve_addrs(cfg)
        self._clients: list[Any | None] = [None] * len(self._addrs)
        self._retry_at = [0.0] * len(self._addrs)
        self._last_warn = 0.0
        self.down = False
        # The scheduler's lookups run on the engine's own thread: a store that
        # hangs may stall a step for at most a second, not the full timeout.
        self._timeout_ms = cfg.timeout_ms if who != "scheduler" else min(cfg.timeout_ms, 1000)

    @property
    def shared_memory(self) -> bool:
        c = self._clients[0]
        return bool(c is not None and c.shared_memory)

    def _warn(self, msg: str, *args) -> None:
        now = time.monotonic()
        if now - self._last_warn >= _WARN_EVERY_S:
            self._last_warn = now
            logger.warning("OpenLake (%s): " + msg, self._who, *args)

    def _client(self, i: int):
        c = self._clients[i]
        if c is not None:
            return c
        if time.monotonic() < self._retry_at[i]:
            return None
        from openlake_client import Client
        addr, token, token_file = self._addrs[i]
        try:
            c = Client(addr, token=token, token_file=token_file, namespace=self._ns,
                       value_size=self._value_size, timeout_ms=self._timeout_ms)
        except PermissionError as e:
            self._retry_at[i] = time.monotonic() + max(self._cfg.reconnect_secs, 5.0)
            self._warn("%s refused the token: %s (check openlake_token / "
                       "openlake_token_file, and that the token's tenant claims the "
                       "namespace: openlake_namespace)", addr, e)
            return None
        except (OSError, ValueError) as e:
            self._retry_at[i] = time.monotonic() + self._cfg.reconnect_secs
            self.down = True
            self._warn("cannot reach %s (%s); running without it: misses and dropped "
                       "saves until it is back", addr, e)
            return None
        if self.down:
            logger.info("OpenLake (%s): connected to %s again", self._who, addr)
        self.down = False
        self._clients[i] = c
        return c

    def _fail(self, i: int, what: str, e: BaseException) -> None:
        c, self._clients[i] = self._clients[i], None
        self._retry_at[i] = time.monotonic() + self._cfg.reconnect_secs
        self.down = True
        self._warn("%s failed on %s (%s); reconnecting", what, self._addrs[i][0], e)
        if c is not None:
            try:
                c.close()
            except Exception:  # noqa: BLE001
                pass

    def node_of(self, prefix: bytes) -> int:
        n = len(self._addrs)
        return 0 if n == 1 else int.from_bytes(prefix[:8], "little") % n

    def _call(self, node: int, what: str, op):
        """op(client) on node's client; None when the store cannot be reached.
        A call that fails on a connection that had worked is tried once more on
        a new connection at once (the store restarted since the last call)."""
        for attempt in (0, 1):
            c = self._client(node)
            if c is None:
                return None
            try:
                return op(c)
            except (OSError, ValueError) as e:
                self._fail(node, what, e)
                if attempt == 0:
                    self._retry_at[node] = 0.0
        return None

    def _batched(self, node: int, what: str, method: str, keys: list[bytes],
                 bufs: list[Any] | None = None) -> list | None:
        """Client.<method> over keys (and bufs) in calls of _KEYS_PER_CALL keys."""
        def op(c):
            fn, out = getattr(c, method), []
            for s in range(0, len(keys), _KEYS_PER_CALL):
                args = (keys[s:s + _KEYS_PER_CALL],) if bufs is None else \
                    (keys[s:s + _KEYS_PER_CALL], bufs[s:s + _KEYS_PER_CALL])
                r = fn(*args)
                out.extend(r[0] if method == "exists" else r)
            return out
        return self._call(node, what, op)

    def exists(self, keys: list[bytes], node: int) -> list[bool]:
        r = self._batched(node, "lookup", "exists", keys)
        return r if r is not None else [False] * len(keys)

    def put(self, keys: list[bytes], bufs: list[Any], node: int) -> list[int] | None:
        return self._batched(node, "save", "put", keys, bufs)

    def get(self, keys: list[bytes], bufs: list[Any], node: int) -> list[int] | None:
        return self._batched(node, "load", "get", keys, bufs)

    def reset(self) -> bool:
        return all([self._call(i, "reset", lambda c: c.reset() or True) is not None
                    for i in range(len(self._addrs))])

    def close(self) -> None:
        for i, c in enumerate(self._clients):
            self._clients[i] = None
            if c is not None:
                try:
                    c.close()
                except Exception:  # noqa: BLE001
                    pass
