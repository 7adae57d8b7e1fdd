"""The scheduler half: how many leading blocks of a prompt OpenLake holds
(side-effect free; sliding-window groups need only the blocks inside their
window), the loads into the blocks vLLM allocates, the saves of blocks that
became full in a step, delayed frees while saves run, fences for
sliding-window blocks vLLM frees and reuses while their save may still run,
KV events and reset."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Iterable

from .keys import _block_prefix
from .meta import OpenLakeConnectorMetadata, OpenLakeWorkerMetadata, _Transfer
from .stats import _StatsBox
from .store import _Store

_NULL_BLOCK = 0  # vLLM's null block (block pool's first): no KV, never copied

if TYPE_CHECKING:
    from vllm.v1.core.kv_cache_manager import KVCacheBlocks
    from vllm.v1.core.sched.output import SchedulerOutput
    from vllm.v1.request import Request

    from ..openlake_connector import OpenLakeConnector


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
        self.next_job = 1
        # save job -> [request, first block, blocks, workers that stored it all,
        #              its sliding-window block ids]
        self.save_jobs: dict[int, list[Any]] = {}
        # Sliding-window block id -> the last save job that reads it.  vLLM
        # frees such blocks while the request still runs; when one comes back
        # in a later step's allocation, the workers must finish that save
        # before the step writes the block (meta.fence).
        self.swa_pending: dict[int, int] = {}
        self.events: list[Any] = []
        self.fence: set[int] = set()
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

    def _swa_ids(self, block_ids: list[tuple[int, ...]]) -> list[int]:
        return [ids[gi] for ids in block_ids for gi, w in enumerate(self.c.windows)
                if w is not None and ids[gi] != _NULL_BLOCK]

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
        found = self._lookup(prefixes, num_computed_tokens // bs)
        st.stored_blocks = found
        hit = max(0, found * bs - num_computed_tokens)
        st.looked_up = max(0, nblocks * bs - num_computed_tokens)
        return (hit, True) if hit > 0 else (0, False)

    def _lookup(self, prefixes: list[bytes], local_blocks: int) -> int:
        """The most leading blocks a load can bring this request to: every
        full-attention value of blocks 0..N-1 present, and of each
        sliding-window group the values of the blocks its window still reads
        at N (from `window_start`, or from what vLLM already holds)."""
        sfx_group = self.c.suffix_group
        per, ng = len(sfx_group), len(self.c.groups)
        keys = [k for p in prefixes for k in self._block_keys(p)]
        present = self.store.exists(keys)   # per key: its home (or node) has it
        ok = [[True] * ng for _ in prefixes]   # per block, per group: all values there
        for i in range(len(prefixes)):
            row = ok[i]
            for s, there in enumerate(present[i * per:(i + 1) * per]):
                if not there:
                    row[sfx_group[s]] = False
        windows = self.c.windows
        full = [gi for gi, w in enumerate(windows) if w is None]
        swa = [gi for gi, w in enumerate(windows) if w is not None]
        n = 0
        while n < len(ok) and all(ok[n][gi] for gi in full):
            n += 1
        # A sliding-window group may miss early blocks (never saved: vLLM had
        # freed them); the longest N whose windows are whole wins.
        bs = self.c.block_size
        for hit in range(n, local_blocks, -1):
            if all(ok[i][gi] for gi in swa
                   for i in range(max(self.c.window_start(gi, hit * bs), local_blocks), hit)):
                return hit
        return 0

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
        self._fence_ids(b for ids in block_ids for b in ids)

    def _job(self) -> int:
        j = self.next_job
        self.next_job += 1
        return j

    def _fence_ids(self, ids: Iterable[int]) -> None:
        """Blocks vLLM just handed out: a save still reading one (a
        sliding-window block freed while its request ran) must end first."""
        if not self.swa_pending:
            return
        for b in ids:
            if self.swa_pending.pop(b, None) is not None:
                self.fence.add(b)

    def build_connector_meta(self, so: "SchedulerOutput") -> OpenLakeConnectorMetadata:
        if self.swa_pending:
            for r in so.scheduled_new_reqs or ():
                for ids in r.block_ids or ():
                    self._fence_ids(ids)
            cached = getattr(so, "scheduled_cached_reqs", None)
            for per_group in getattr(cached, "new_block_ids", None) or ():
                for ids in per_group or ():
                    self._fence_ids(ids)
            self._fence_ids(getattr(so, "new_block_ids_to_zero", None) or ())
        if self.fence:
            self.stats.add(fenced_blocks=len(self.fence))
        meta = OpenLakeConnectorMetadata(loads=self.load_plan, fence=self.fence,
                                         preempted=set(so.preempted_req_ids or ()))
        self.load_plan, self.fence = [], set()
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
        swa_ids = self._swa_ids(block_ids)
        for b in swa_ids:
            self.swa_pending[b] = job
        self.save_jobs[job] = [req, first, full - first, 0, swa_ids]
        st.stored_blocks = full
        st.had_saves = True

    def request_finished(self, request: "Request") -> tuple[bool, dict[str, Any] | None]:
        st = self.reqs.pop(request.request_id, None)
        if st is not None and st.had_saves:
            return True, None  # the worker reports it in finished_sending
        return False, None

    def update_connector_output(self, out) -> None:
        wm = getattr(out, "kv_connector_worker_meta", None)
        if isinstance(wm, OpenLakeWorkerMetadata):
            for job, n in wm.stored.items():
                info = self.save_jobs.get(job)
                if info is None:
                    continue
                info[3] += n   # workers may finish the same job in different steps
                if info[3] >= self.c.num_workers:
                    del self.save_jobs[job]
                    self._event(*info[:3])
                    for b in info[4]:
                        if self.swa_pending.get(b) == job:
                            del self.swa_pending[b]
        # Jobs some worker never confirmed (a dropped save) must not pile up;
        # their swa_pending entries stay (a fence on a finished save is free).
        if len(self.save_jobs) > 4096:
            for j in sorted(self.save_jobs)[:2048]:
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
