"""What OpenLake keys and namespaces the connector uses (format v1, in
docs/vllm-connector.md): the model fingerprint, rank tags, layer tags and the
per-block key prefix."""

from __future__ import annotations

import hashlib
import struct
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from vllm.config import VllmConfig
    from vllm.v1.kv_cache_interface import KVCacheConfig


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
                     f"{getattr(spec, 'page_size_bytes', '')}"
                     + (f":sw{spec.sliding_window}" if "SlidingWindow" in type(spec).__name__
                        else ""))
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


def _block_prefix(block_hash: bytes, salt: str | None) -> bytes:
    h = bytes(block_hash)
    if salt:  # vLLM folds the salt into the hash chain; fold it in again
        h = hashlib.blake2b(h, digest_size=32, key=salt.encode()[:64]).digest()
    return h
