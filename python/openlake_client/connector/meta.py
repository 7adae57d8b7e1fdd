"""Metadata the connector's halves pass each other through vLLM: scheduler ->
workers (loads, saves, preemptions) and workers -> scheduler (saves stored)."""

from __future__ import annotations

from dataclasses import dataclass, field

from vllm.distributed.kv_transfer.kv_connector.v1.base import (
    KVConnectorMetadata,
    KVConnectorWorkerMetadata,
)


@dataclass
class _Transfer:
    """Blocks of one request: per block its key prefix and, per KV cache group,
    the vLLM block id it goes to or comes from (0, vLLM's null block, in a
    sliding-window group outside the window: nothing to copy)."""
    req_id: str
    job_id: int
    prefixes: list[bytes]
    block_ids: list[tuple[int, ...]]


@dataclass
class OpenLakeConnectorMetadata(KVConnectorMetadata):
    loads: list[_Transfer] = field(default_factory=list)
    saves: list[_Transfer] = field(default_factory=list)
    preempted: set[str] = field(default_factory=set)
    # Blocks allocated in this step that an earlier save may still read:
    # workers finish those saves before the step writes any block.
    fence: set[int] = field(default_factory=set)


@dataclass
class OpenLakeWorkerMetadata(KVConnectorWorkerMetadata):
    """Save jobs whose every block this worker stored (for KV events)."""
    stored: dict[int, int] = field(default_factory=dict)  # job id -> workers

    def aggregate(self, other: "KVConnectorWorkerMetadata") -> "KVConnectorWorkerMetadata":
        if isinstance(other, OpenLakeWorkerMetadata):
            for j, n in other.stored.items():
                self.stored[j] = self.stored.get(j, 0) + n
        return self
