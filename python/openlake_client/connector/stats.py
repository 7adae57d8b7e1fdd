"""Connector statistics (vLLM's KVConnectorStats, logged as "KV Transfer
metrics") and their Prometheus export (vllm:openlake_*)."""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Any

from vllm.distributed.kv_transfer.kv_connector.v1.metrics import (
    KVConnectorPromMetrics,
    KVConnectorStats,
)


_COUNTERS = ("lookup_tokens", "hit_tokens", "loaded_blocks", "loaded_bytes",
             "load_failed_blocks", "saved_blocks", "saved_bytes", "save_dropped_blocks",
             "save_failed_blocks", "fenced_blocks", "fence_waits")


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
        "fenced_blocks": "Blocks vLLM handed out again while a save of theirs might "
                         "still run (sliding-window blocks freed mid-request)",
        "fence_waits": "Steps that waited for a save still reading a block vLLM reused "
                       "(sliding-window blocks freed mid-request)",
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
