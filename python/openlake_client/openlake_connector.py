"""OpenLakeConnector: vLLM's V1 KV connector over the OpenLake KV cache.

Enable it with one flag, no code change:

    vllm serve MODEL --kv-transfer-config '{"kv_connector":"OpenLakeConnector",
      "kv_connector_module_path":"openlake_client.openlake_connector",
      "kv_role":"kv_both","kv_connector_extra_config":{
        "openlake_nodes":["127.0.0.1:9400"],"openlake_device":"local"}}'

What this file owns (docs/vllm-connector.md is the user's reference):

- Keys.  One OpenLake value per (KV block, layer): the bytes one layer keeps
  for one block of `block_size` tokens.  The key is the block's
  chained prefix hash from vLLM (`request.block_hashes`, sha256 by default,
  so equal across processes; `cache_salt`, LoRA and multimodal inputs are
  already folded into it, and a salt is folded in again here), then the
  rank tag (TP rank folded when KV heads are replicated, PP, DCP/PCP) and
  the layer tag (KV cache group, position in the group).  The
  namespace carries the model fingerprint (model, dtype, KV cache dtype,
  block size, KV cache groups and their specs, device type, layout), so two
  models never read each other's bytes.
- Scheduler side (`_Scheduler`): looks up how many leading blocks are fully
  present (all layers, all ranks) beyond what vLLM already has, plans async
  loads into the blocks vLLM allocates, plans saves of every block that
  became full in a step, and holds a finished request's blocks until their
  saves are done.
- Worker side (`_Worker`): one I/O thread per worker.  Loads are copied
  straight from OpenLake into vLLM's paged KV tensors (on CPU: the client's
  checked copy writes into the block's bytes, no staging; other layouts and
  GPU tensors go through host rows, `_Layer`), saves straight out of them,
  so the forward pass never waits for the store.  Loads go
  before saves; saves past `openlake_max_pending_save_mb` are dropped.
  A value that is missing, short or fails its xxh3 check makes the whole
  block a load error: vLLM recomputes it (the connector switches vLLM's
  `kv_load_failure_policy` to "recompute" unless told otherwise).
- Store down or restarted: lookups miss, saves drop, loads fail (and are
  recomputed), a warning is logged, and the client reconnects on its own.
"""

from __future__ import annotations

import atexit
import hashlib
import logging
import os
import struct
import threading
import time
import weakref
from collections import deque
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Iterable

import torch

from vllm.distributed.kv_transfer.kv_connector.v1.base import (
    KVConnectorBase_V1,
    KVConnectorMetadata,
    KVConnectorRole,
    KVConnectorWorkerMetadata,
    SupportsHMA,
)
from vllm.distributed.kv_transfer.kv_connector.v1.metrics import (
    KVConnectorPromMetrics,
    KVConnectorStats,
)

try:  # the hit-source label exists in newer vLLM releases only
    from vllm.v1.metrics.cache_hit_source import CacheHitSource as _CacheHitSource
except ImportError:  # pragma: no cover - older vLLM
    _CacheHitSource = None

if TYPE_CHECKING:
    from vllm.config import VllmConfig
    from vllm.v1.core.kv_cache_manager import KVCacheBlocks
    from vllm.v1.core.sched.output import SchedulerOutput
    from vllm.v1.kv_cache_interface import KVCacheConfig
    from vllm.v1.request import Request

logger = logging.getLogger("vllm.openlake_connector")

_KEYS_PER_CALL = 4096          # keys per client call: under the server's 8192/shard
_WARN_EVERY_S = 30.0           # one store-down warning per this many seconds

# ---------------------------------------------------------------------------
# Configuration (kv_connector_extra_config)
# ---------------------------------------------------------------------------

_DEVICES = ("local", "tcp", "ucx")


@dataclass(frozen=True)
class OpenLakeConfig:
    nodes: tuple[str, ...]
    device: str = "local"
    socket: str | None = None
    token: str | None = None
    token_file: str | None = None
    namespace: str = "vllm"
    timeout_ms: int = 5000
    max_pending_save_mb: int = 2048
    save_decode: bool = True
    reconnect_secs: float = 1.0
    load_failure_policy: str = "recompute"
    populate_gb: float = 16.0

    _KEYS = {
        "openlake_nodes": "a non-empty list of \"host:port\" KV addresses",
        "openlake_device": "one of \"local\", \"tcp\", \"ucx\"",
        "openlake_socket": "the KV Unix socket path of the local openlaked",
        "openlake_token": "the KV token",
        "openlake_token_file": "a file holding the KV token",
        "openlake_namespace": "a namespace prefix, 1..64 printable characters",
        "openlake_timeout_ms": "an integer from 100 to 600000",
        "openlake_max_pending_save_mb": "an integer from 0 to 1048576",
        "openlake_save_decode": "true or false",
        "openlake_reconnect_secs": "a number from 0.05 to 600",
        "openlake_load_failure_policy": "\"recompute\" or \"fail\"",
        "openlake_populate_gb": "a number from 0 to 1048576",
    }

    @classmethod
    def from_extra(cls, extra: dict[str, Any] | None) -> "OpenLakeConfig":
        extra = dict(extra or {})

        def bad(key: str, why: str = "") -> ValueError:
            got = repr(extra.get(key))
            return ValueError(
                f"kv_connector_extra_config[{key!r}] must be {cls._KEYS[key]}"
                f"{'; ' + why if why else ''} (got {got})")

        unknown = sorted(k for k in extra if k.startswith("openlake_") and k not in cls._KEYS)
        if unknown:
            raise ValueError(
                f"kv_connector_extra_config: unknown key(s) {', '.join(unknown)}; "
                f"known: {', '.join(sorted(cls._KEYS))}")
        nodes = extra.get("openlake_nodes", ["127.0.0.1:9400"])
        if isinstance(nodes, str):
            nodes = [nodes]
        if (not isinstance(nodes, (list, tuple)) or not nodes
                or not all(isinstance(n, str) and _parse_hostport(n) for n in nodes)):
            raise bad("openlake_nodes")
        if len(set(nodes)) != len(nodes):
            raise bad("openlake_nodes", "an address is listed twice")
        device = extra.get("openlake_device", "local")
        if device not in _DEVICES:
            raise bad("openlake_device")
        if device == "ucx":
            raise bad("openlake_device",
                      "the UCX transport is not in this build yet: use \"local\" "
                      "(shared memory on this host) or \"tcp\"")

        def opt_str(key: str) -> str | None:
            v = extra.get(key)
            if v is None:
                return None
            if not isinstance(v, str) or not v:
                raise bad(key)
            return v

        def num(key: str, default, lo, hi, kind=int):
            v = extra.get(key, default)
            if isinstance(v, bool) or not isinstance(v, (int, float)) or \
                    (kind is int and int(v) != v) or not lo <= v <= hi:
                raise bad(key)
            return kind(v)

        ns = extra.get("openlake_namespace", "vllm")
        if (not isinstance(ns, str) or not 1 <= len(ns) <= 64
                or not all(33 <= ord(ch) < 127 for ch in ns)):
            raise bad("openlake_namespace")
        save_decode = extra.get("openlake_save_decode", True)
        if not isinstance(save_decode, bool):
            raise bad("openlake_save_decode")
        policy = extra.get("openlake_load_failure_policy", "recompute")
        if policy not in ("recompute", "fail"):
            raise bad("openlake_load_failure_policy")
        if opt_str("openlake_token") and opt_str("openlake_token_file"):
            raise bad("openlake_token", "give openlake_token or openlake_token_file, not both")
        return cls(
            nodes=tuple(nodes), device=device, socket=opt_str("openlake_socket"),
            token=opt_str("openlake_token"), token_file=opt_str("openlake_token_file"),
            namespace=ns,
            timeout_ms=num("openlake_timeout_ms", 5000, 100, 600000),
            max_pending_save_mb=num("openlake_max_pending_save_mb", 2048, 0, 1 << 20),
            save_decode=save_decode,
            reconnect_secs=num("openlake_reconnect_secs", 1.0, 0.05, 600.0, float),
            load_failure_policy=policy,
            populate_gb=num("openlake_populate_gb", 16.0, 0, 1 << 20, float))


def _parse_hostport(s: str) -> bool:
    host, sep, port = s.rpartition(":")
    return bool(sep and host and port.isdigit() and 1 <= int(port) <= 65535)


def _resolve_addrs(cfg: OpenLakeConfig) -> list[tuple[str, str | None, str | None]]:
    """One (addr, token, token_file) per node.  device "local" uses the Unix socket
    (shared memory); its token defaults to kv.token beside the socket."""
    token, token_file = cfg.token, cfg.token_file
    if token is None and token_file is None:
        token = os.environ.get("OPENLAKE_KV_TOKEN") or None
    if cfg.device == "local":
        sock = cfg.socket or os.environ.get("OPENLAKE_KV_SOCKET") or None
        if sock is None and os.path.exists("./data/kv.sock"):
            sock = os.path.abspath("./data/kv.sock")
        if sock is None:
            raise ValueError(
                "kv_connector_extra_config['openlake_socket'] is needed with "
                "openlake_device \"local\": the path of openlaked's KV Unix socket "
                "(kv_socket in its config; by default kv.sock in its first data dir), "
                "or set OPENLAKE_KV_SOCKET, or use openlake_device \"tcp\"")
        if len(cfg.nodes) > 1:
            raise ValueError(
                "kv_connector_extra_config['openlake_nodes']: openlake_device \"local\" "
                "takes one node (this host); list several nodes with \"tcp\"")
        if token is None and token_file is None:
            token_file = os.path.join(os.path.dirname(sock), "kv.token")
        return [(sock, token, token_file)]
    if token is None and token_file is None:
        raise ValueError(
            "kv_connector_extra_config['openlake_token'] or ['openlake_token_file'] is "
            "needed with openlake_device \"tcp\" (openlaked's kv_token; by default "
            "kv.token in its first data dir), or set OPENLAKE_KV_TOKEN")
    return [(n, token, token_file) for n in cfg.nodes]


# ---------------------------------------------------------------------------
# Keys
# ---------------------------------------------------------------------------

def _fingerprint(vllm_config: "VllmConfig", kv_cache_config: "KVCacheConfig") -> str:
    """What must be equal for two engines' KV bytes to be interchangeable."""
    mc, cc = vllm_config.model_config, vllm_config.cache_config
    parts = [
        "v1",
        str(getattr(mc, "model", "")), str(getattr(mc, "revision", None)),
        str(getattr(mc, "dtype", "")), str(getattr(cc, "cache_dtype", "")),
        str(getattr(cc, "block_size", "")),
        str(getattr(vllm_config.device_config, "device_type", "")),
        str(getattr(kv_cache_config, "kv_cache_layout", None)),
        str(getattr(mc, "quantization", None)),
    ]
    try:  # the attention layout vLLM picked (NHD / HND), when it exposes it
        from vllm.v1.attention.backends.utils import get_kv_cache_layout
        parts.append(str(get_kv_cache_layout()))
    except Exception:  # noqa: BLE001 - optional
        parts.append("?")
    for g, group in enumerate(kv_cache_config.kv_cache_groups):
        spec = group.kv_cache_spec
        parts.append(f"g{g}:{type(spec).__name__}:{len(group.layer_names)}:"
                     f"{getattr(spec, 'block_size', '')}:{getattr(spec, 'num_kv_heads', '')}:"
                     f"{getattr(spec, 'head_size', '')}:{getattr(spec, 'dtype', '')}:"
                     f"{getattr(spec, 'page_size_bytes', '')}")
    return hashlib.sha256("|".join(parts).encode()).hexdigest()[:24]


def _rank_tags(vllm_config: "VllmConfig") -> tuple[list[int], int]:
    """Every rank tag whose keys make a block complete, and this process's tag
    (meaningful on workers).  TP ranks that hold the same KV heads share a tag."""
    pc, mc = vllm_config.parallel_config, vllm_config.model_config
    tp = int(getattr(pc, "tensor_parallel_size", 1) or 1)
    pp = int(getattr(pc, "pipeline_parallel_size", 1) or 1)
    dcp = int(getattr(pc, "decode_context_parallel_size", 1) or 1)
    pcp = int(getattr(pc, "prefill_context_parallel_size", 1) or 1)
    try:
        heads = 1 if mc.use_mla else int(mc.get_total_num_kv_heads())
    except Exception:  # noqa: BLE001
        heads = tp
    tp_distinct = tp if heads >= tp else max(1, heads)

    def tag(t, p, d, c):
        return ((t * pp + p) * dcp + d) * pcp + c

    tags = [tag(t, p, d, c) for t in range(tp_distinct) for p in range(pp)
            for d in range(dcp) for c in range(pcp)]
    mine = 0
    try:
        from vllm.distributed import parallel_state as ps
        t = ps.get_tensor_model_parallel_rank()
        t = t if heads >= tp else t * tp_distinct // tp
        p = ps.get_pp_group().rank_in_group if pp > 1 else 0
        d = ps.get_dcp_group().rank_in_group if dcp > 1 else 0
        c = ps.get_pcp_group().rank_in_group if pcp > 1 else 0
        mine = tag(t, p, d, c)
    except Exception:  # noqa: BLE001 - the scheduler has no parallel groups
        pass
    return tags, mine


def _layer_tag(group: int, pos: int, plane: int) -> bytes:
    return struct.pack("<BHB", group, pos, plane)


def _block_parts(t, nb: int, name: str) -> list[torch.Tensor]:
    """A layer's KV as tensors indexed by block id on dim 0: vLLM's CPU and
    FlashInfer layouts put blocks first; FlashAttention's puts K/V first."""
    if isinstance(t, (list, tuple)):
        parts = list(t)
    elif t.shape[0] == nb:
        parts = [t]
    elif t.dim() >= 2 and t.shape[0] == 2 and t.shape[1] == nb:
        parts = [t[0], t[1]]
    else:
        raise ValueError(f"layer {name}: KV shape {tuple(t.shape)} has no block "
                         f"dimension of {nb}")
    if any(p.shape[0] != nb for p in parts):
        raise ValueError(f"layer {name}: KV parts without {nb} blocks")
    return parts


_MADV_POPULATE_WRITE = 23  # Linux 5.14


def _populate_write(ptr: int, n: int) -> None:
    """madvise(MADV_POPULATE_WRITE): fault the pages in without changing them.
    Best effort: older kernels refuse it."""
    import ctypes
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.madvise.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
        start = ptr & ~4095
        end = (ptr + n + 4095) & ~4095
        libc.madvise(start, end - start, _MADV_POPULATE_WRITE)
    except (OSError, AttributeError):
        pass


class _nullctx:
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


def _block_prefix(block_hash: bytes, salt: str | None) -> bytes:
    h = bytes(block_hash)
    if salt:  # vLLM folds the salt into the hash chain; fold it in again
        h = hashlib.blake2b(h, digest_size=32, key=salt.encode()[:64]).digest()
    return h


# ---------------------------------------------------------------------------
# Store access: clients per node, reconnect, never raise into vLLM
# ---------------------------------------------------------------------------

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
                       value_size=self._value_size, timeout_ms=self._cfg.timeout_ms)
        except PermissionError as e:
            self._retry_at[i] = time.monotonic() + max(self._cfg.reconnect_secs, 5.0)
            self._warn("%s refused the token: %s (check openlake_token / "
                       "openlake_token_file)", addr, e)
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

    def exists(self, keys: list[bytes], node: int) -> list[bool]:
        def op(c):
            out: list[bool] = []
            for s in range(0, len(keys), _KEYS_PER_CALL):
                out.extend(c.exists(keys[s:s + _KEYS_PER_CALL])[0])
            return out
        r = self._call(node, "lookup", op)
        return r if r is not None else [False] * len(keys)

    def put(self, keys: list[bytes], bufs: list[Any], node: int) -> list[int] | None:
        def op(c):
            out: list[int] = []
            for s in range(0, len(keys), _KEYS_PER_CALL):
                out.extend(c.put(keys[s:s + _KEYS_PER_CALL], bufs[s:s + _KEYS_PER_CALL]))
            return out
        return self._call(node, "save", op)

    def get(self, keys: list[bytes], bufs: list[Any], node: int) -> list[int] | None:
        def op(c):
            out: list[int] = []
            for s in range(0, len(keys), _KEYS_PER_CALL):
                out.extend(c.get(keys[s:s + _KEYS_PER_CALL], bufs[s:s + _KEYS_PER_CALL]))
            return out
        return self._call(node, "load", op)

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


# ---------------------------------------------------------------------------
# Metadata passed scheduler -> worker -> scheduler
# ---------------------------------------------------------------------------

@dataclass
class _Transfer:
    """Blocks of one request: per block its key prefix and, per KV cache group,
    the vLLM block id it goes to or comes from."""
    req_id: str
    job_id: int
    prefixes: list[bytes]
    block_ids: list[tuple[int, ...]]


@dataclass
class OpenLakeConnectorMetadata(KVConnectorMetadata):
    loads: list[_Transfer] = field(default_factory=list)
    saves: list[_Transfer] = field(default_factory=list)
    preempted: set[str] = field(default_factory=set)


@dataclass
class OpenLakeWorkerMetadata(KVConnectorWorkerMetadata):
    """Save jobs whose every block this worker stored (for KV events)."""
    stored: dict[int, int] = field(default_factory=dict)  # job id -> workers

    def aggregate(self, other: "KVConnectorWorkerMetadata") -> "KVConnectorWorkerMetadata":
        if isinstance(other, OpenLakeWorkerMetadata):
            for j, n in other.stored.items():
                self.stored[j] = self.stored.get(j, 0) + n
        return self


# ---------------------------------------------------------------------------
# Stats and Prometheus
# ---------------------------------------------------------------------------

_COUNTERS = ("lookup_tokens", "hit_tokens", "loaded_blocks", "loaded_bytes",
             "load_failed_blocks", "saved_blocks", "saved_bytes", "save_dropped_blocks",
             "save_failed_blocks")


@dataclass
class OpenLakeConnectorStats(KVConnectorStats):
    def __post_init__(self):
        for k in _COUNTERS:
            self.data.setdefault(k, 0)
        self.data.setdefault("load_ms", [])
        self.data.setdefault("save_ms", [])

    def reset(self):
        self.data = {}
        self.__post_init__()

    def aggregate(self, other: KVConnectorStats) -> KVConnectorStats:
        for k in _COUNTERS:
            self.data[k] += int(other.data.get(k, 0))
        self.data["load_ms"].extend(other.data.get("load_ms", ()))
        self.data["save_ms"].extend(other.data.get("save_ms", ()))
        return self

    def reduce(self) -> dict[str, int | float]:
        out: dict[str, int | float] = {k: self.data[k] for k in _COUNTERS}
        for k in ("load_ms", "save_ms"):
            v = sorted(self.data[k])
            out[k.replace("_ms", "_ms_p50")] = round(v[len(v) // 2], 3) if v else 0.0
        return out

    def is_empty(self) -> bool:
        return not any(self.data[k] for k in _COUNTERS) and not self.data["load_ms"] \
            and not self.data["save_ms"]


class OpenLakePromMetrics(KVConnectorPromMetrics):
    """vllm:openlake_* counters and latency histograms, one child per engine."""

    _DOCS = {
        "lookup_tokens": "Prompt tokens looked up in OpenLake",
        "hit_tokens": "Prompt tokens found in OpenLake (loaded instead of prefilled)",
        "loaded_blocks": "KV blocks loaded from OpenLake",
        "loaded_bytes": "KV bytes loaded from OpenLake",
        "load_failed_blocks": "KV blocks whose load failed (recomputed)",
        "saved_blocks": "KV blocks saved to OpenLake",
        "saved_bytes": "KV bytes saved to OpenLake",
        "save_dropped_blocks": "KV block saves dropped (store busy, full or down)",
        "save_failed_blocks": "KV block saves the store refused",
    }

    def __init__(self, vllm_config, metric_types, labelnames, per_engine_labelvalues):
        super().__init__(vllm_config, metric_types, labelnames, per_engine_labelvalues)
        self._counters: dict[str, dict[int, Any]] = {}
        for k in _COUNTERS:
            m = self._counter_cls(name=f"vllm:openlake_{k}", documentation=self._DOCS[k],
                                  labelnames=labelnames)
            self._counters[k] = {i: m.labels(*v) for i, v in per_engine_labelvalues.items()}
        buckets = [0.1, 0.25, 0.5, 1, 2.5, 5, 10, 25, 50, 100, 250, 500, 1000, 2500]
        self._hists: dict[str, dict[int, Any]] = {}
        for k, doc in (("load_ms", "Time to load one request's blocks from OpenLake (ms)"),
                       ("save_ms", "Time to save one step's blocks of a request (ms)")):
            m = self._histogram_cls(name=f"vllm:openlake_{k}", documentation=doc,
                                    buckets=buckets, labelnames=labelnames)
            self._hists[k] = {i: m.labels(*v) for i, v in per_engine_labelvalues.items()}

    def observe(self, transfer_stats_data: dict[str, Any], engine_idx: int = 0):
        for k in _COUNTERS:
            v = int(transfer_stats_data.get(k, 0) or 0)
            if v and engine_idx in self._counters[k]:
                self._counters[k][engine_idx].inc(v)
        for k, h in self._hists.items():
            if engine_idx in h:
                for v in transfer_stats_data.get(k, ()):
                    h[engine_idx].observe(v)


class _StatsBox:
    def __init__(self):
        self._lock = threading.Lock()
        self._s = OpenLakeConnectorStats()

    def add(self, **kw):
        with self._lock:
            for k, v in kw.items():
                if k.endswith("_ms"):
                    self._s.data[k].append(v)
                else:
                    self._s.data[k] += v

    def take(self) -> OpenLakeConnectorStats | None:
        with self._lock:
            if self._s.is_empty():
                return None
            s, self._s = self._s, OpenLakeConnectorStats()
            return s


# ---------------------------------------------------------------------------
# Scheduler side
# ---------------------------------------------------------------------------

@dataclass
class _ReqState:
    request: Any
    local_tokens: int = 0          # vLLM's own hit when we looked up
    stored_blocks: int = 0         # leading blocks known to be in OpenLake
    looked_up: int = 0             # tokens the last lookup asked about
    had_saves: bool = False


class _Scheduler:
    def __init__(self, conn: "OpenLakeConnector"):
        self.c = conn
        self.reqs: dict[str, _ReqState] = {}
        self.load_plan: list[_Transfer] = []
        self.delayed: set[str] = set()
        self.next_job = 1
        self.save_jobs: dict[int, tuple[Any, int, int]] = {}  # job -> (req, first, count)
        self.events: list[Any] = []
        self.stats = _StatsBox()
        self._store: _Store | None = None

    @property
    def store(self) -> _Store:
        if self._store is None:
            self._store = _Store(self.c.cfg, self.c.namespace, self.c.value_size, "scheduler")
        return self._store

    # Keys: per block, all (rank, group, layer, plane) suffixes.
    def _block_keys(self, prefix: bytes) -> list[bytes]:
        return [prefix + s for s in self.c.all_suffixes]

    def _prefixes(self, request: "Request", nblocks: int) -> list[bytes]:
        hashes = request.block_hashes
        r = self.c.hash_ratio
        salt = getattr(request, "cache_salt", None)
        return [_block_prefix(hashes[(i + 1) * r - 1], salt) for i in range(nblocks)]

    def _full_blocks(self, request: "Request", ntokens: int) -> int:
        return min(ntokens // self.c.block_size, len(request.block_hashes) // self.c.hash_ratio)

    def get_num_new_matched_tokens(self, request: "Request", num_computed_tokens: int):
        st = self.reqs.get(request.request_id)
        if st is None:
            st = self.reqs[request.request_id] = _ReqState(request)
        st.request, st.local_tokens = request, num_computed_tokens
        st.stored_blocks = 0
        if not self.c.enabled:
            return 0, False
        bs = self.c.block_size
        # Never the block holding the prompt's last token: vLLM computes that one.
        nblocks = self._full_blocks(request, max(request.num_tokens - 1, 0))
        if nblocks == 0:
            return 0, False
        prefixes = self._prefixes(request, nblocks)
        found = self._leading_present(prefixes)
        st.stored_blocks = found
        hit = max(0, found * bs - num_computed_tokens)
        st.looked_up = max(0, nblocks * bs - num_computed_tokens)
        return (hit, True) if hit > 0 else (0, False)

    def _leading_present(self, prefixes: list[bytes]) -> int:
        per = len(self.c.all_suffixes)
        store = self.store
        by_node: dict[int, list[int]] = {}
        for i, p in enumerate(prefixes):
            by_node.setdefault(store.node_of(p), []).append(i)
        ok = [True] * len(prefixes)
        for node, idx in by_node.items():
            keys = [k for i in idx for k in self._block_keys(prefixes[i])]
            present = store.exists(keys, node)
            for j, i in enumerate(idx):
                ok[i] = all(present[j * per:(j + 1) * per])
        n = 0
        while n < len(ok) and ok[n]:
            n += 1
        return n

    def update_state_after_alloc(self, request: "Request", blocks: "KVCacheBlocks",
                                 num_external_tokens: int):
        st = self.reqs.get(request.request_id)
        if st is None:
            st = self.reqs[request.request_id] = _ReqState(request)
        st.request = request
        if st.looked_up:  # counted once per admission, not per lookup
            self.stats.add(lookup_tokens=st.looked_up, hit_tokens=max(0, num_external_tokens))
            st.looked_up = 0
        if num_external_tokens <= 0 or not self.c.enabled:
            return
        bs = self.c.block_size
        first = st.local_tokens // bs
        count = num_external_tokens // bs
        ids = blocks.get_block_ids()
        groups = self.c.groups
        prefixes = self._prefixes(request, first + count)[first:]
        block_ids = [tuple(ids[g][first + i] for g in groups) for i in range(count)]
        job = self._job()
        self.load_plan.append(_Transfer(request.request_id, job, prefixes, block_ids))
        st.stored_blocks = max(st.stored_blocks, first + count)

    def _job(self) -> int:
        j = self.next_job
        self.next_job += 1
        return j

    def build_connector_meta(self, so: "SchedulerOutput") -> OpenLakeConnectorMetadata:
        meta = OpenLakeConnectorMetadata(loads=self.load_plan,
                                         preempted=set(so.preempted_req_ids or ()))
        self.load_plan = []
        if self.c.enabled:
            for req_id, n in so.num_scheduled_tokens.items():
                st = self.reqs.get(req_id)
                if st is not None and n > 0:
                    self._plan_saves(st, n, meta)
        for req_id in meta.preempted:
            st = self.reqs.get(req_id)
            if st is not None:
                st.stored_blocks = 0
        return meta

    def _plan_saves(self, st: _ReqState, n_sched: int, meta: OpenLakeConnectorMetadata):
        req = st.request
        after = req.num_computed_tokens + n_sched
        if not self.c.cfg.save_decode:
            after = min(after, req.num_prompt_tokens)
        full = self._full_blocks(req, after)
        if full <= st.stored_blocks:
            return
        first = st.stored_blocks
        mgr = self.c._kv_cache_manager
        if mgr is None:
            return
        ids = mgr.get_block_ids(req.request_id)
        groups = self.c.groups
        if any(len(ids[g]) < full for g in groups):
            return
        prefixes = self._prefixes(req, full)[first:]
        block_ids = [tuple(ids[g][i] for g in groups) for i in range(first, full)]
        job = self._job()
        meta.saves.append(_Transfer(req.request_id, job, prefixes, block_ids))
        self.save_jobs[job] = (req, first, full - first)
        st.stored_blocks = full
        st.had_saves = True

    def request_finished(self, request: "Request") -> tuple[bool, dict[str, Any] | None]:
        st = self.reqs.pop(request.request_id, None)
        if st is not None and st.had_saves:
            self.delayed.add(request.request_id)
            return True, None
        return False, None

    def update_connector_output(self, out) -> None:
        for rid in out.finished_sending or ():
            self.delayed.discard(rid)
        wm = getattr(out, "kv_connector_worker_meta", None)
        if isinstance(wm, OpenLakeWorkerMetadata):
            for job, n in wm.stored.items():
                info = self.save_jobs.pop(job, None)
                if info is not None and n >= self.c.num_workers:
                    self._event(*info)
        # Jobs never confirmed (dropped saves) must not pile up.
        if len(self.save_jobs) > 65536:
            for j in sorted(self.save_jobs)[:32768]:
                del self.save_jobs[j]

    def _event(self, req, first: int, count: int) -> None:
        try:
            from vllm.distributed.kv_events import BlockStored
            from vllm.v1.core.kv_cache_utils import maybe_convert_block_hash
        except ImportError:  # pragma: no cover
            return
        bs, r = self.c.block_size, self.c.hash_ratio
        hashes = [req.block_hashes[(i + 1) * r - 1] for i in range(first, first + count)]
        parent = req.block_hashes[first * r - 1] if first > 0 else None
        toks = list(req.all_token_ids[first * bs:(first + count) * bs])
        lora = getattr(req, "lora_request", None)
        try:
            self.events.append(BlockStored(
                block_hashes=[maybe_convert_block_hash(h) for h in hashes],
                parent_block_hash=maybe_convert_block_hash(parent) if parent else None,
                token_ids=toks, block_size=bs, lora_id=getattr(lora, "lora_int_id", None),
                medium="OPENLAKE", lora_name=getattr(lora, "lora_name", None)))
        except TypeError:  # field drift between vLLM releases: skip the event
            pass

    def take_events(self) -> Iterable[Any]:
        ev, self.events = self.events, []
        return ev

    def reset_cache(self) -> bool:
        for st in self.reqs.values():
            st.stored_blocks = 0
        return self.store.reset()

    def shutdown(self):
        if self._store is not None:
            self._store.close()


# ---------------------------------------------------------------------------
# Worker side
# ---------------------------------------------------------------------------

class _Layer:
    """One layer's KV for the blocks of one group: the tensor(s) vLLM indexes by
    block id on dim 0 (one tensor, or K and V apart).  One OpenLake value per
    block: the block's bytes of each part, in order.  On CPU with a single
    part whose per-block bytes are contiguous (vLLM's CPU layout), the client
    copies straight to and from the tensor (`buf`); otherwise the bytes go
    through host rows (`stage_out` / `stage_in`), on a side CUDA stream for
    GPU tensors."""

    def __init__(self, parts: list[torch.Tensor], suffix: bytes):
        self.parts, self.suffix = parts, suffix
        self.part_bytes = [p[0].numel() * p.element_size() for p in parts]
        self.nbytes = sum(self.part_bytes)
        self.device = parts[0].device
        self.arr = None
        if len(parts) == 1 and self.device.type == "cpu":
            t = parts[0]
            arr = (t.view(torch.uint8) if t.dtype != torch.uint8 else t).numpy()
            if arr[0].flags["C_CONTIGUOUS"]:
                self.arr = arr

    @property
    def direct(self) -> bool:
        return self.arr is not None

    def buf(self, b: int):
        return self.arr[b]

    def rows(self, n: int) -> torch.Tensor:
        return torch.empty((n, self.nbytes), dtype=torch.uint8,
                           pin_memory=self.device.type == "cuda")

    def stage_out(self, ids: list[int], rows: torch.Tensor) -> None:
        """rows[i] = block ids[i]'s bytes (asynchronous on a CUDA stream)."""
        idx = torch.tensor(ids, dtype=torch.long).to(self.device, non_blocking=True)
        # Gathered on the tensor's device into whole rows, then one copy.
        gathered = [p.index_select(0, idx).reshape(len(ids), -1).view(torch.uint8)
                    for p in self.parts]
        src = gathered[0] if len(gathered) == 1 else torch.cat(gathered, dim=1)
        rows.copy_(src, non_blocking=True)

    def stage_in(self, ids: list[int], rows: torch.Tensor) -> None:
        """Block ids[i] = rows[i]."""
        if not ids:
            return
        idx = torch.tensor(ids, dtype=torch.long).to(self.device, non_blocking=True)
        src = rows.to(self.device, non_blocking=True)
        off = 0
        for p, pb in zip(self.parts, self.part_bytes):
            chunk = src[:, off:off + pb].contiguous().view(p.dtype)
            p.index_copy_(0, idx, chunk.reshape(len(ids), *p.shape[1:]))
            off += pb


class _Job:
    __slots__ = ("kind", "t", "done")

    def __init__(self, kind: str, t: _Transfer):
        self.kind, self.t, self.done = kind, t, False


class _Worker:
    def __init__(self, conn: "OpenLakeConnector"):
        self.c = conn
        self.planes: list[list[_Layer]] = []   # per group: its layers
        self.direct = True
        self.suffix_order: list[bytes] = []
        self.ready = False
        self._store: _Store | None = None
        self._lock = threading.Condition()
        self._loads: deque[_Job] = deque()
        self._saves: deque[_Job] = deque()
        self._pending_save_bytes = 0
        self._inflight_saves: dict[str, int] = {}   # req -> save jobs queued or running
        self._saved_reqs: set[str] = set()
        self._awaiting: set[str] = set()
        self._done_loads: set[str] = set()
        self._load_errors: set[int] = set()
        self._snap_errors: set[int] = set()
        self._stored_jobs: dict[int, int] = {}
        self._stop = False
        self.stats = _StatsBox()
        self._thread: threading.Thread | None = None
        self._stream = None

    # -- setup ---------------------------------------------------------------
    def register(self, kv_caches: dict[str, torch.Tensor]) -> None:
        kcc = self.c.kv_cache_config
        nb = kcc.num_blocks
        layers: list[list[_Layer]] = []
        try:
            for g in self.c.groups:
                gl: list[_Layer] = []
                for pos, name in enumerate(kcc.kv_cache_groups[g].layer_names):
                    gl.append(_Layer(_block_parts(kv_caches[name], nb, name),
                                     self.c.rank_suffix + _layer_tag(g, pos, 0)))
                layers.append(gl)
        except (KeyError, ValueError, RuntimeError) as e:
            logger.error("OpenLake: this KV cache layout is not supported (%s); the "
                         "connector is off on this worker: no loads, no saves", e)
            self.c.enabled = False
            return
        want = {g: kcc.kv_cache_groups[g].kv_cache_spec.page_size_bytes for g in self.c.groups}
        for g, gl in zip(self.c.groups, layers):
            if any(ly.nbytes != want[g] for ly in gl):
                logger.error("OpenLake: a layer of KV cache group %d holds %d bytes a block, "
                             "not the %d its spec says; the connector is off on this worker",
                             g, gl[0].nbytes, want[g])
                self.c.enabled = False
                return
        self.planes = layers
        self.suffix_order = [ly.suffix for gl in layers for ly in gl]
        self.direct = all(ly.direct for gl in layers for ly in gl)
        if any(ly.device.type == "cuda" for gl in layers for ly in gl):
            self._stream = torch.cuda.Stream()
        self.ready = True
        self._thread = threading.Thread(target=self._run, name="openlake-io", daemon=True)
        self._thread.start()
        # generate() can return while the last saves still run: finish them
        # before the interpreter exits (vLLM does not always call shutdown()).
        ref = weakref.ref(self)
        atexit.register(lambda: (w := ref()) is not None and w.shutdown())
        logger.info("OpenLake: %d layers, %d bytes a block each, %s copies; namespace %s",
                    len(self.suffix_order), max(want.values()),
                    "direct" if self.direct else "staged", self.c.namespace)

    @property
    def store(self) -> _Store:
        if self._store is None:
            self._store = _Store(self.c.cfg, self.c.namespace, self.c.value_size, "worker")
        return self._store

    def _block_bytes(self) -> int:
        return sum(ly.nbytes for gl in self.planes for ly in gl)

    # -- called from the model runner thread ---------------------------------
    def start_loads(self, meta: OpenLakeConnectorMetadata) -> None:
        if not meta.loads:
            return
        if not self.ready:
            logger.warning("OpenLake: loads planned but this worker has no KV cache "
                           "registered (layout refused, or vLLM never called "
                           "register_kv_caches): vLLM recomputes them")
        with self._lock:
            for t in meta.loads:
                if self.ready:
                    self._loads.append(_Job("load", t))
                else:  # nowhere to load into: every block is an error
                    self._load_errors.update(b for ids in t.block_ids for b in ids)
                    self._done_loads.add(t.req_id)
            self._lock.notify()

    def queue_saves(self, meta: OpenLakeConnectorMetadata) -> None:
        if not meta.saves:
            return
        limit = self.c.cfg.max_pending_save_mb << 20
        per_block = self._block_bytes()
        with self._lock:
            for t in meta.saves:
                self._saved_reqs.add(t.req_id)
                need = per_block * len(t.block_ids)
                if not self.ready or self._pending_save_bytes + need > limit:
                    self.stats.add(save_dropped_blocks=len(t.block_ids))
                    continue
                self._pending_save_bytes += need
                self._inflight_saves[t.req_id] = self._inflight_saves.get(t.req_id, 0) + 1
                self._saves.append(_Job("save", t))
            self._lock.notify()

    def wait_saves_of(self, req_ids: set[str]) -> None:
        """Preempted requests: vLLM reuses their blocks at once, so their saves
        must be finished (or never started) before this step writes."""
        if not req_ids:
            return
        with self._lock:
            kept = deque(j for j in self._saves if j.t.req_id not in req_ids)
            for j in self._saves:
                if j.t.req_id in req_ids:
                    self._finish_save_locked(j, dropped=True)
            self._saves = kept
            while any(self._inflight_saves.get(r, 0) for r in req_ids):
                self._lock.wait(0.5)

    def get_finished(self, finished: set[str]) -> tuple[set[str] | None, set[str] | None]:
        with self._lock:
            self._awaiting.update(r for r in finished if r in self._saved_reqs)
            sending = {r for r in self._awaiting if not self._inflight_saves.get(r)}
            self._awaiting -= sending
            self._saved_reqs -= sending
            recving, self._done_loads = self._done_loads, set()
            self._snap_errors |= self._load_errors
            self._load_errors = set()
        return (sending or None), (recving or None)

    def take_load_errors(self) -> set[int]:
        with self._lock:
            e, self._snap_errors = self._snap_errors, set()
        return e

    def worker_meta(self) -> OpenLakeWorkerMetadata | None:
        with self._lock:
            if not self._stored_jobs:
                return None
            m, self._stored_jobs = OpenLakeWorkerMetadata(stored=self._stored_jobs), {}
        return m

    def shutdown(self) -> None:
        """Finishes queued loads and saves (at most 30 s), then closes."""
        with self._lock:
            self._stop = True
            self._lock.notify_all()
        if self._thread is not None:
            self._thread.join(timeout=30)
            self._thread = None
        if self._store is not None:
            self._store.close()

    # -- the I/O thread ------------------------------------------------------
    def _prefault(self) -> None:
        """Before the first job: fill this process's page tables for the slab
        and for vLLM's CPU KV tensors (up to openlake_populate_gb each), so the
        first loads after a start copy instead of taking page faults."""
        limit = int(self.c.cfg.populate_gb * (1 << 30))
        if limit <= 0:
            return
        t0 = time.perf_counter()
        try:
            c = self.store._client(0)
            if c is not None and c.shared_memory:
                c.populate(limit)
        except (OSError, ValueError):
            pass
        spans = {}
        for gl in self.planes:
            for ly in gl:
                for p in ly.parts:
                    if p.device.type == "cpu":
                        st = p.untyped_storage()
                        spans[st.data_ptr()] = st.nbytes()
        done = 0
        for ptr, n in sorted(spans.items()):
            n = min(n, limit - done)
            if n <= 0:
                break
            _populate_write(ptr, n)
            done += n
        logger.info("OpenLake: page tables filled in %.0f ms (slab, and %d MiB of KV cache)",
                    (time.perf_counter() - t0) * 1e3, done >> 20)

    def _run(self) -> None:
        self._prefault()
        while True:
            with self._lock:
                while not self._loads and not self._saves and not self._stop:
                    self._lock.wait()
                if self._loads:
                    job = self._loads.popleft()
                elif self._saves:
                    job = self._saves.popleft()
                else:  # stopping, nothing left
                    return
            try:
                if job.kind == "load":
                    self._do_load(job.t)
                else:
                    self._do_save(job)
            except Exception as e:  # noqa: BLE001 - never kill the I/O thread
                logger.exception("OpenLake: %s of request %s failed: %s", job.kind,
                                 job.t.req_id, e)
                with self._lock:
                    if job.kind == "load":
                        self._load_errors.update(b for ids in job.t.block_ids for b in ids)
                        self._done_loads.add(job.t.req_id)
                    else:
                        self._finish_save_locked(job, dropped=True)
                        self._lock.notify_all()

    def _io_lists(self, t: _Transfer, staged: list[torch.Tensor] | None):
        """Keys and buffers of a transfer, block-major, grouped by node; per
        buffer the transfer's block index."""
        store = self.store
        by_node: dict[int, tuple[list[bytes], list[Any], list[int]]] = {}
        for i, prefix in enumerate(t.prefixes):
            keys, bufs, blk = by_node.setdefault(store.node_of(prefix), ([], [], []))
            k = 0
            for gi, gl in enumerate(self.planes):
                b = t.block_ids[i][gi]
                for ly in gl:
                    keys.append(prefix + ly.suffix)
                    bufs.append(ly.buf(b) if staged is None else staged[k][i].numpy())
                    blk.append(i)
                    k += 1
        return by_node

    def _stage(self, t: _Transfer, load: bool) -> list[torch.Tensor] | None:
        """Host rows per layer for layouts the client cannot reach directly;
        for a save, filled with the blocks' bytes."""
        if self.direct:
            return None
        out = []
        ctx = torch.cuda.stream(self._stream) if self._stream is not None else _nullctx()
        with ctx:
            for gi, gl in enumerate(self.planes):
                ids = [b[gi] for b in t.block_ids]
                for ly in gl:
                    rows = ly.rows(len(ids))
                    if not load:
                        ly.stage_out(ids, rows)
                    out.append(rows)
        if self._stream is not None:
            self._stream.synchronize()
        return out

    def _unstage(self, t: _Transfer, staged: list[torch.Tensor], good: list[bool]) -> None:
        ok = [i for i in range(len(t.block_ids)) if good[i]]
        ctx = torch.cuda.stream(self._stream) if self._stream is not None else _nullctx()
        k = 0
        with ctx:
            for gi, gl in enumerate(self.planes):
                ids = [t.block_ids[i][gi] for i in ok]
                for ly in gl:
                    ly.stage_in(ids, staged[k][ok] if ok else staged[k][:0])
                    k += 1
        if self._stream is not None:
            self._stream.synchronize()

    def _do_load(self, t: _Transfer) -> None:
        t0 = time.perf_counter()
        staged = self._stage(t, load=True)
        good = [True] * len(t.prefixes)
        for node, (keys, bufs, blk) in self._io_lists(t, staged).items():
            res = self.store.get(keys, bufs, node)
            for j, i in enumerate(blk):
                if res is None or res[j] != bufs[j].nbytes:
                    good[i] = False
        if staged is not None:
            self._unstage(t, staged, good)
        # A block is usable only if every block before it is: vLLM recomputes
        # from the first bad one, and we report every block from there on.
        bad_from = good.index(False) if False in good else len(good)
        n_ok = bad_from
        per_block = self._block_bytes()
        self.stats.add(loaded_blocks=n_ok, loaded_bytes=n_ok * per_block,
                       load_failed_blocks=len(good) - n_ok,
                       load_ms=(time.perf_counter() - t0) * 1e3)
        with self._lock:  # after the stats: they travel in the same step
            for i in range(bad_from, len(good)):
                self._load_errors.update(t.block_ids[i])
            self._done_loads.add(t.req_id)
        if n_ok < len(good):
            logger.warning("OpenLake: request %s: %d of %d blocks could not be loaded; "
                           "vLLM recomputes them", t.req_id, len(good) - n_ok, len(good))

    def _do_save(self, job: _Job) -> None:
        t = job.t
        t0 = time.perf_counter()
        staged = self._stage(t, load=False)
        stored = dropped = failed = 0
        nbytes = 0
        for node, (keys, bufs, blk) in self._io_lists(t, staged).items():
            res = self.store.put(keys, bufs, node)
            if res is None:
                dropped += len(keys)
                continue
            for j, r in enumerate(res):
                if r in (0, 1):  # OK, EXISTS
                    stored += 1
                    nbytes += bufs[j].nbytes
                elif r in (3, 11, 4):  # NOSPACE, QUOTA, BUSY: the store is under pressure
                    dropped += 1
                else:
                    failed += 1
        per = max(1, len(self.suffix_order))
        self.stats.add(saved_blocks=stored // per, saved_bytes=nbytes,
                       save_dropped_blocks=-(-dropped // per), save_failed_blocks=-(-failed // per),
                       save_ms=(time.perf_counter() - t0) * 1e3)
        with self._lock:
            if stored == len(t.prefixes) * per:
                self._stored_jobs[t.job_id] = self._stored_jobs.get(t.job_id, 0) + 1
            self._finish_save_locked(job, dropped=False)
            self._lock.notify_all()

    def _finish_save_locked(self, job: _Job, dropped: bool) -> None:
        if job.done:
            return
        job.done = True
        per_block = self._block_bytes()
        self._pending_save_bytes -= per_block * len(job.t.block_ids)
        n = self._inflight_saves.get(job.t.req_id, 0) - 1
        if n > 0:
            self._inflight_saves[job.t.req_id] = n
        else:
            self._inflight_saves.pop(job.t.req_id, None)
        if dropped:
            self.stats.add(save_dropped_blocks=len(job.t.block_ids))


# ---------------------------------------------------------------------------
# The connector
# ---------------------------------------------------------------------------

class OpenLakeConnector(KVConnectorBase_V1, SupportsHMA):
    """vLLM KV connector backed by OpenLake (see the module docstring)."""

    if _CacheHitSource is not None:
        _cache_hit_source = getattr(_CacheHitSource, "HOST", _CacheHitSource.EXTERNAL_UNSPECIFIED)

    def __init__(self, vllm_config: "VllmConfig", role: KVConnectorRole,
                 kv_cache_config: "KVCacheConfig" = None):
        super().__init__(vllm_config, role, kv_cache_config)
        if kv_cache_config is None:
            raise ValueError("OpenLakeConnector needs vLLM >= 0.11 (kv_cache_config)")
        self.cfg = OpenLakeConfig.from_extra(
            self._kv_transfer_config.kv_connector_extra_config)
        _resolve_addrs(self.cfg)  # config errors surface at start-up
        self.kv_cache_config = kv_cache_config
        self.enabled = True
        cc = vllm_config.cache_config
        groups = []
        for g, group in enumerate(kv_cache_config.kv_cache_groups):
            kind = type(group.kv_cache_spec).__name__
            if "FullAttention" in kind or "MLAAttention" in kind:
                groups.append(g)
            else:
                self._off(f"KV cache group {g} is {kind}; OpenLake stores full-attention "
                          f"KV only, so this model runs without it")
        self.groups = tuple(groups)
        specs = [kv_cache_config.kv_cache_groups[g].kv_cache_spec for g in self.groups]
        self.block_size = specs[0].block_size if specs else int(cc.block_size or 16)
        if any(s.block_size != self.block_size for s in specs):
            self._off("KV cache groups use different block sizes")
        hash_bs = getattr(kv_cache_config, "hash_block_size", None) or self.block_size
        if self.block_size % hash_bs:
            self._off(f"block size {self.block_size} is not a multiple of the hash block "
                      f"size {hash_bs}")
        self.hash_ratio = max(1, self.block_size // hash_bs)
        if not getattr(cc, "enable_prefix_caching", True):
            self._off("prefix caching is off (--no-enable-prefix-caching), so vLLM computes "
                      "no block hashes; turn it on to use OpenLake")
        algo = str(getattr(cc, "prefix_caching_hash_algo", "sha256"))
        if algo.startswith("xxhash") and os.environ.get("PYTHONHASHSEED") is None:
            self._off(f"prefix_caching_hash_algo={algo} without PYTHONHASHSEED gives "
                      f"every vLLM process its own random block hashes, so no other "
                      f"process could ever read what this one saves; set PYTHONHASHSEED "
                      f"to the same value for every engine, or use sha256")
        tags, mine = _rank_tags(vllm_config)
        self.rank_tags = tags
        self.rank_suffix = struct.pack("<H", mine)
        self.num_workers = int(getattr(vllm_config.parallel_config, "world_size", 1) or 1)
        self.all_suffixes = [struct.pack("<H", t) + _layer_tag(g, pos, 0)
                             for t in tags for g in self.groups
                             for pos in range(len(kv_cache_config.kv_cache_groups[g].layer_names))]
        self.value_size = max((s.page_size_bytes for s in specs), default=0)
        self.namespace = f"{self.cfg.namespace}/{_fingerprint(vllm_config, kv_cache_config)}"
        self.sched: _Scheduler | None = None
        self.worker: _Worker | None = None
        if role == KVConnectorRole.SCHEDULER:
            self.sched = _Scheduler(self)
            if self.cfg.load_failure_policy == "recompute" and \
                    getattr(self._kv_transfer_config, "kv_load_failure_policy", None) == "fail":
                # A cache miss is never an error: recompute what could not be loaded.
                self._kv_transfer_config.kv_load_failure_policy = "recompute"
        else:
            self.worker = _Worker(self)
        logger.info("OpenLakeConnector %s: %s via %s, namespace %s, block %d tokens, "
                    "%s", role.name, ",".join(self.cfg.nodes), self.cfg.device,
                    self.namespace, self.block_size, "on" if self.enabled else "OFF")

    def _off(self, why: str) -> None:
        if self.enabled:
            logger.warning("OpenLakeConnector is off: %s", why)
        self.enabled = False

    @property
    def requires_kv_delivery(self) -> bool:
        return False  # a best-effort cache: a dropped save is a later miss

    # -- worker side ---------------------------------------------------------
    def register_kv_caches(self, kv_caches: dict[str, torch.Tensor]):
        if self.worker is not None and self.enabled:
            self.worker.register(kv_caches)

    def handle_preemptions(self, kv_connector_metadata: KVConnectorMetadata):
        if self.worker is not None and isinstance(kv_connector_metadata,
                                                  OpenLakeConnectorMetadata):
            self.worker.wait_saves_of(kv_connector_metadata.preempted)

    def start_load_kv(self, forward_context, **kwargs) -> None:
        meta = self._connector_metadata
        if self.worker is not None and isinstance(meta, OpenLakeConnectorMetadata):
            self.worker.start_loads(meta)

    def wait_for_layer_load(self, layer_name: str) -> None:
        return  # loads are asynchronous: the request waits in WAITING_FOR_REMOTE_KVS

    def save_kv_layer(self, layer_name: str, kv_layer: torch.Tensor, attn_metadata,
                      **kwargs) -> None:
        return  # whole blocks are saved after the step, in wait_for_save

    def wait_for_save(self):
        meta = self._connector_metadata
        if self.worker is not None and isinstance(meta, OpenLakeConnectorMetadata):
            self.worker.queue_saves(meta)

    def get_finished(self, finished_req_ids: set[str]):
        if self.worker is None:
            return None, None
        return self.worker.get_finished(finished_req_ids)

    def get_block_ids_with_load_errors(self) -> set[int]:
        return self.worker.take_load_errors() if self.worker is not None else set()

    def build_connector_worker_meta(self):
        return self.worker.worker_meta() if self.worker is not None else None

    def get_kv_connector_stats(self):
        part = self.worker if self.worker is not None else self.sched
        return part.stats.take() if part is not None else None

    def shutdown(self):
        if self.worker is not None:
            self.worker.shutdown()
        if self.sched is not None:
            self.sched.shutdown()

    # -- scheduler side ------------------------------------------------------
    def get_num_new_matched_tokens(self, request: "Request", num_computed_tokens: int):
        return self.sched.get_num_new_matched_tokens(request, num_computed_tokens)

    def update_state_after_alloc(self, request: "Request", blocks: "KVCacheBlocks",
                                 num_external_tokens: int):
        self.sched.update_state_after_alloc(request, blocks, num_external_tokens)

    def build_connector_meta(self, scheduler_output: "SchedulerOutput") -> KVConnectorMetadata:
        return self.sched.build_connector_meta(scheduler_output)

    def update_connector_output(self, connector_output) -> None:
        self.sched.update_connector_output(connector_output)

    def request_finished(self, request: "Request", block_ids: list[int]):
        return self.sched.request_finished(request)

    def request_finished_all_groups(self, request: "Request",
                                    block_ids: tuple[list[int], ...]):
        return self.sched.request_finished(request)

    def take_events(self) -> Iterable[Any]:
        return self.sched.take_events() if self.sched is not None else ()

    def reset_cache(self) -> bool | None:
        return self.sched.reset_cache() if self.sched is not None else None

    @classmethod
    def get_required_kvcache_layout(cls, vllm_config: "VllmConfig") -> str | None:
        return None

    @classmethod
    def build_kv_connector_stats(cls, data: dict[str, Any] | None = None):
        return OpenLakeConnectorStats(data=dict(data)) if data is not None \
            else OpenLakeConnectorStats()

    @classmethod
    def build_prom_metrics(cls, vllm_config, metric_types, labelnames, per_engine_labelvalues):
        return OpenLakePromMetrics(vllm_config, metric_types, labelnames,
                                   per_engine_labelvalues)
