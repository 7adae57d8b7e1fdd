"""The connector's OpenLake clients: one per node, created lazily, reconnected
with a backoff, batches cut under the server's per-call key limit. Every
method answers safely (miss, dropped, failed) when the store is down and
logs one warning per 30 s: the engine never sees an exception from here.

Routing. With openlake_device "tcp" or "ucx", the store asks a listed node for the
cluster's KV members (Client.members: protocol v2 MEMBERS) at its first
call, every _MEMBERS_EVERY_S after, and again soon after a call fails (at
most once per openlake_reconnect_secs). In a cluster each key goes straight
to its homes, placed by the nodes' own rule (openlake_client.Placement,
docs/cluster.md "Placement"): a save to its first home (which sends the
other homes their copies; a save its first home did not answer goes to
the next), a lookup and a load to its first home, then to
the next home for the keys a home did not have (cluster.kv_replicas > 1);
each member reached at its kv_addr ("ucx": its kv_ucx_addr, which a node
answers on its UCX listener) with the same token, connected lazily.
A home that is down costs its keys' misses and dropped saves (with
kv_replicas > 1 the saves go to the next home). Without a
cluster (a node of no cluster, of protocol v1, or none answering), and
with "local": every key of a block to one listed node picked from the
block hash (node_of), as before."""

from __future__ import annotations

import logging
import time
from typing import Any

from .config import OpenLakeConfig, _resolve_addrs, client_addr

logger = logging.getLogger("vllm.openlake_connector")

_KEYS_PER_CALL = 4096          # keys per client call: under the server's 8192/shard
_WARN_EVERY_S = 30.0           # one store-down warning per this many seconds
_MEMBERS_EVERY_S = 10.0        # the cluster's members asked again this often


class _Store:
    """The OpenLake client(s) of one connector role.  Every method returns a
    safe answer (miss, dropped, failed) when the store is down."""

    def __init__(self, cfg: OpenLakeConfig, namespace: str, value_size: int, who: str):
        self._cfg, self._ns, self._value_size, self._who = cfg, namespace, value_size, who
        self._addrs = _resolve_addrs(cfg)
        self._listed = len(self._addrs)   # the configured nodes; members' addresses follow
        self._clients: list[Any | None] = [None] * len(self._addrs)
        self._retry_at = [0.0] * len(self._addrs)
        self._last_warn = 0.0
        # the cluster's placement (tcp and ucx): None = route by node_of
        self._place: Any | None = None
        self._replicas = 1
        self._node_of_id: dict[int, int] = {}   # member id -> index in _addrs (-1: no kv_addr)
        self._members_at = 0.0 if cfg.device in ("tcp", "ucx") else float("inf")
        self.revision = 0                       # the members' etcd revision (0: no cluster)
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
        # the members may have changed (a node left): ask again soon
        self._members_at = min(self._members_at, self._retry_at[i])
        self._warn("%s failed on %s (%s); reconnecting", what, self._addrs[i][0], e)
        if c is not None:
            try:
                c.close()
            except Exception:  # noqa: BLE001
                pass

    def node_of(self, prefix: bytes) -> int:
        n = self._listed
        return 0 if n == 1 else int.from_bytes(prefix[:8], "little") % n

    # ---- the cluster's members ------------------------------------------------

    def _refresh_members(self) -> None:
        """Asks the listed nodes, in turn, for the members until one answers
        (a node in backoff is skipped), for at most one call's timeout in all
        (the rest of the list waits for the next time)."""
        t0 = time.monotonic()
        self._members_at = t0 + _MEMBERS_EVERY_S
        for i in range(self._listed):
            if i and time.monotonic() - t0 >= self._timeout_ms / 1e3:
                return
            r = self._call(i, "members", lambda c: c.members())
            if r is None:
                continue
            revision, replicas, members = r
            if replicas == 0 or not members:
                self._use_members(0, 1, [])
                return
            if revision != self.revision or self._place is None:
                self._use_members(revision, replicas, members)
            return

    def _use_members(self, revision: int, replicas: int, members: list) -> None:
        """Routes by these members from now on (none: by node_of)."""
        from openlake_client import Placement
        place = None
        if members:
            try:
                place = Placement([(m[0], m[1]) for m in members], revision)
            except (ValueError, TypeError) as e:
                self._warn("the cluster's members cannot be used (%s)", e)
                return
        elif self._place is not None:
            logger.info("OpenLake (%s): the nodes answer no cluster members; keys go to the "
                        "listed nodes", self._who)
        # The clients: the listed nodes, then one per member address (kept
        # when it was there before), so at most listed + 4096 of them.
        n = self._listed
        old = {self._addrs[i][0]: (self._clients[i], self._retry_at[i])
               for i in range(n, len(self._addrs))}
        addrs, clients, retry = self._addrs[:n], self._clients[:n], self._retry_at[:n]
        index = {a[0]: i for i, a in enumerate(addrs)}
        token, token_file = addrs[0][1], addrs[0][2]
        node_of_id: dict[int, int] = {}
        for mid, _w, addr in members:
            if not addr:
                node_of_id[mid] = -1    # no KV address (of this transport): its keys miss
                continue
            addr = client_addr(self._cfg, addr)
            if addr not in index:
                index[addr] = len(addrs)
                c, at = old.pop(addr, (None, 0.0))
                addrs.append((addr, token, token_file))
                clients.append(c)
                retry.append(at)
            node_of_id[mid] = index[addr]
        for c, _at in old.values():      # members no more
            if c is not None:
                try:
                    c.close()
                except Exception:  # noqa: BLE001
                    pass
        self._addrs, self._clients, self._retry_at = addrs, clients, retry
        if place is not None and (self._place is None or revision != self.revision):
            logger.info("OpenLake (%s): cluster placement at revision %d: %d KV members, "
                        "%d home(s) per key", self._who, revision, len(members), replicas)
        self._place, self._node_of_id = place, node_of_id
        self._replicas = max(1, min(int(replicas), 16))
        self.revision = revision if place is not None else 0

    def _homes(self, keys: list[bytes]) -> list[tuple[int, ...]] | None:
        """Per key the client indices of its homes, best first (-1: a home with
        no address); None without a cluster placement."""
        if time.monotonic() >= self._members_at:
            try:
                self._refresh_members()
            except Exception as e:  # noqa: BLE001 - routing falls back, never raises
                self._warn("asking for the cluster's members failed (%s)", e)
        if self._place is None:
            return None
        ids = self._place.homes(self._ns, keys, self._replicas)
        m = self._node_of_id
        return [tuple(m.get(h, -1) for h in t) for t in ids]

    # ---- calls ------------------------------------------------------------------

    def _call(self, node: int, what: str, op):
        """op(client) on node's client; None when the store cannot be reached.
        A call that fails on a connection that had worked is tried once more on
        a new connection at once (the store restarted since the last call)."""
        if node < 0:
            return None
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

    def _routed(self, what: str, method: str, keys: list[bytes], bufs: list[Any] | None,
                done) -> list:
        """Client.<method> for each key at its node: without a cluster the
        listed node node_of(key) picks; in one, its first home, then (for the
        keys whose answer `done` does not accept) its next homes in turn. Per
        key the answer, None where no node answered."""
        out: list = [None] * len(keys)
        homes = self._homes(keys) if keys else None
        if homes is None:
            asks = [(i, self.node_of(k)) for i, k in enumerate(keys)]
            ranks = 1
        else:
            asks = [(i, h[0]) for i, h in enumerate(homes) if h]
            ranks = self._replicas
        for rank in range(ranks):
            by_node: dict[int, list[int]] = {}
            for i, node in asks:
                by_node.setdefault(node, []).append(i)
            for node, idx in by_node.items():
                r = self._batched(node, what, method, [keys[i] for i in idx],
                                  None if bufs is None else [bufs[i] for i in idx])
                for j, i in enumerate(idx):
                    out[i] = None if r is None else r[j]
            if homes is None or rank + 1 >= ranks:
                break
            asks = [(i, homes[i][rank + 1]) for i, _ in asks
                    if not done(out[i]) and len(homes[i]) > rank + 1]
            if not asks:
                break
        return out

    def exists(self, keys: list[bytes]) -> list[bool]:
        """Per key: present at its node (a home, in a cluster). A key is
        present only if a node says so."""
        return [bool(x) for x in self._routed("lookup", "exists", keys, None, bool)]

    def put(self, keys: list[bytes], bufs: list[Any]) -> list[int | None]:
        """Per key a status (OK, EXISTS, NOSPACE...), None when its node was
        not reached. In a cluster, saved at its first home (which sends the
        other homes their copies), or at its next home when the first was
        not reached (kv_replicas > 1: the save is not lost with one home)."""
        return self._routed("save", "put", keys, bufs, lambda r: r is not None)

    def get(self, keys: list[bytes], bufs: list[Any]) -> list[int | None]:
        """Per key the length read or -status, None when no node was reached;
        a key its home did not have (or whose home was down) is asked of its
        next home."""
        return self._routed("load", "get", keys, bufs,
                            lambda r: r is not None and r != -2)  # -2: NOT_FOUND

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
