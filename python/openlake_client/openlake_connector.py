"""OpenLakeConnector: vLLM's V1 KV connector over the OpenLake KV cache.

Enable it with one flag, no code change:

    vllm serve MODEL --kv-transfer-config '{"kv_connector":"OpenLakeConnector",
      "kv_connector_module_path":"openlake_client.openlake_connector",
      "kv_role":"kv_both","kv_connector_extra_config":{
        "openlake_nodes":["127.0.0.1:9400"],"openlake_device":"local"}}'

This module is the class vLLM loads; its parts live in openlake_client/connector/
(config, keys, store, meta, stats, scheduler, worker). docs/vllm-connector.md
is the user's reference. In short:

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
  present (all layers, all ranks; for sliding-window groups only the blocks
  the window still reads) beyond what vLLM already has, plans async loads
  into the blocks vLLM allocates, plans saves of every block that became
  full in a step, holds a finished request's blocks until their saves are
  done, and fences sliding-window blocks vLLM frees and hands out again
  while a save may still read them.
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

import logging
import os
import struct
from typing import TYPE_CHECKING, Any, Iterable

import torch

from vllm.distributed.kv_transfer.kv_connector.v1.base import (
    KVConnectorBase_V1,
    KVConnectorMetadata,
    KVConnectorRole,
    SupportsHMA,
)

from .connector.config import OpenLakeConfig, _resolve_addrs
from .connector.keys import _fingerprint, _layer_tag, _rank_tags
from .connector.meta import OpenLakeConnectorMetadata, OpenLakeWorkerMetadata, _Transfer
from .connector.scheduler import _Scheduler
from .connector.stats import OpenLakeConnectorStats, OpenLakePromMetrics
from .connector.worker import _Worker

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

__all__ = ["OpenLakeConnector", "OpenLakeConfig", "OpenLakeConnectorMetadata",
           "OpenLakeWorkerMetadata", "OpenLakeConnectorStats", "OpenLakePromMetrics",
           "_resolve_addrs", "_Transfer", "_Worker"]

logger = logging.getLogger("vllm.openlake_connector")


def _group_kind(spec) -> tuple[int, int] | None | str:
    """None for a full-attention group, (window, extra retained tokens) for a
    sliding-window one, or why the connector cannot serve the group."""
    from vllm.v1 import kv_cache_interface as kci
    swa = getattr(kci, "SlidingWindowSpec", None)
    if swa is not None and isinstance(spec, swa):
        sw = int(getattr(spec, "sliding_window", 0) or 0)
        if sw <= 0:
            return "a sliding window without a size"
        return sw, int(getattr(spec, "extra_retained_tokens", 0) or 0)
    # vLLM frees a middle gap of these blocks during decode, or they hold
    # something other than one block's KV of a prefix.
    odd = tuple(c for c in (getattr(kci, n, None) for n in
                            ("RSWASpec", "HiddenStateCacheSpec", "SinkFullAttentionSpec"))
                if c is not None)
    full = getattr(kci, "FullAttentionSpec", None)
    if full is not None and isinstance(spec, full) and not isinstance(spec, odd):
        return None
    if type(spec).__name__.startswith("Mamba"):
        return ("a Mamba (state-space) group keeps one running state per request, not "
                "per-block KV; OpenLake does not store it yet")
    return "OpenLake stores full-attention and sliding-window KV only"


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
        groups, windows = [], []
        for g, group in enumerate(kv_cache_config.kv_cache_groups):
            how = _group_kind(group.kv_cache_spec)
            if isinstance(how, str):
                self._off(f"KV cache group {g} is {type(group.kv_cache_spec).__name__}: "
                          f"{how}, so this model runs without OpenLake")
                continue
            groups.append(g)
            windows.append(how)
        self.groups = tuple(groups)
        # Per group: None (full attention: every block of a prefix is read) or
        # (sliding_window, extra_retained_tokens): only the blocks inside the
        # window before the hit point are read, so only those must be loaded.
        self.windows = tuple(windows)
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
        self.all_suffixes, self.suffix_group = [], []   # every key of a block; its group
        for t in tags:
            for gi, g in enumerate(self.groups):
                for pos in range(len(kv_cache_config.kv_cache_groups[g].layer_names)):
                    self.all_suffixes.append(struct.pack("<H", t) + _layer_tag(g, pos, 0))
                    self.suffix_group.append(gi)
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

    def window_start(self, gi: int, ntokens: int) -> int:
        """First block of group `gi` that attention still reads once `ntokens`
        tokens are computed: vLLM holds null blocks before it (its sliding
        window manager's rule, extra retained tokens included)."""
        w = self.windows[gi]
        if w is None:
            return 0
        sw, extra = w
        return max(0, ntokens - sw + 1 - extra) // self.block_size

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
            # Before vLLM zeroes, copies or computes into this step's blocks.
            self.worker.wait_saves_of(kv_connector_metadata.preempted)
            self.worker.wait_fence(kv_connector_metadata.fence)

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
