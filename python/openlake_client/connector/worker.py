"""The worker half: vLLM's KV tensors as per-layer block values, and one I/O
thread that runs loads (first) and saves (bounded, dropped past the limit)
between OpenLake and those tensors, directly on CPU or through host rows
(other layouts, GPU tensors on a side CUDA stream); load errors, finished
transfers and stored saves reported back to vLLM."""

from __future__ import annotations

import atexit
import logging
import threading
import time
import weakref
from collections import deque
from typing import TYPE_CHECKING, Any

import torch

from .keys import _layer_tag
from .meta import OpenLakeConnectorMetadata, OpenLakeWorkerMetadata, _Transfer
from .stats import _StatsBox
from .store import _Store

if TYPE_CHECKING:
    from ..openlake_connector import OpenLakeConnector

logger = logging.getLogger("vllm.openlake_connector")

# A load asks for openlake_load_part_mb of values at a time, whole blocks,
# in prefix order, and stops at the first part with a key missing (vLLM
# recomputes from there). In a cluster the local daemon fetches each part's
# keys from their homes within cluster.kv_timeout_ms (docs/cluster.md "The
# KV pool"): a part must fit in it, a whole 32K prefix need not.


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


_NULL_BLOCK = 0  # vLLM's null block: a sliding-window block outside the window


class _Job:
    __slots__ = ("kind", "t", "done", "ids")

    def __init__(self, kind: str, t: _Transfer):
        self.kind, self.t, self.done = kind, t, False
        self.ids = frozenset(b for ids in t.block_ids for b in ids) - {_NULL_BLOCK}


class _Worker:
    def __init__(self, conn: "OpenLakeConnector"):
        self.c = conn
        self.planes: list[list[_Layer]] = []   # per group: its layers
        self.block_bytes = 0
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
        self._running: _Job | None = None
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
        self.block_bytes = sum(ly.nbytes for gl in layers for ly in gl)  # all layers, one block
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
                    self._load_errors.update(_Job("load", t).ids)
                    self._done_loads.add(t.req_id)
            self._lock.notify()

    def queue_saves(self, meta: OpenLakeConnectorMetadata) -> None:
        if not meta.saves:
            return
        limit = self.c.cfg.max_pending_save_mb << 20
        per_block = self.block_bytes
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

    def wait_fence(self, fence: set[int]) -> None:
        """Blocks vLLM hands out again in this step (sliding-window blocks it
        freed while their request ran): every save still reading one must
        finish before the step zeroes, copies or computes into it."""
        if not fence:
            return
        waited = False
        with self._lock:
            while any(j.kind == "save" and not j.done and not j.ids.isdisjoint(fence)
                      for j in (*self._saves, self._running) if j is not None):
                waited = True
                self._lock.wait(0.5)
        if waited:
            self.stats.add(fence_waits=1)

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
                self._running = job
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
                        self._load_errors.update(job.ids)
                        self._done_loads.add(job.t.req_id)
                    else:
                        self._finish_save_locked(job, dropped=True)
                        self._lock.notify_all()
            finally:
                with self._lock:
                    self._running = None

    def _io_lists(self, t: _Transfer, staged: list[torch.Tensor] | None):
        """Keys and buffers of a transfer, block-major; per buffer the
        transfer's block index (the store routes each key to its node). A
        group's null block (outside a sliding window) has nothing to copy."""
        keys: list[bytes] = []
        bufs: list[Any] = []
        blk: list[int] = []
        for i, prefix in enumerate(t.prefixes):
            k = 0
            for gi, gl in enumerate(self.planes):
                b = t.block_ids[i][gi]
                if b == _NULL_BLOCK:
                    k += len(gl)
                    continue
                for ly in gl:
                    keys.append(prefix + ly.suffix)
                    bufs.append(ly.buf(b) if staged is None else staged[k][i].numpy())
                    blk.append(i)
                    k += 1
        return keys, bufs, blk

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
        ctx = torch.cuda.stream(self._stream) if self._stream is not None else _nullctx()
        k = 0
        with ctx:
            for gi, gl in enumerate(self.planes):
                ok = [i for i in range(len(t.block_ids))
                      if good[i] and t.block_ids[i][gi] != _NULL_BLOCK]
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
        keys, bufs, blk = self._io_lists(t, staged)
        res: list[int | None] = [None] * len(keys)
        s, part_bytes = 0, int(self.c.cfg.load_part_mb * (1 << 20))
        while s < len(keys):
            e, nb = s + 1, bufs[s].nbytes
            while e < len(keys) and (blk[e] == blk[e - 1] or
                                     nb + bufs[e].nbytes <= part_bytes):
                nb += bufs[e].nbytes
                e += 1
            res[s:e] = self.store.get(keys[s:e], bufs[s:e])
            if any(res[j] != bufs[j].nbytes for j in range(s, e)):
                break      # the blocks from here on are recomputed: not loaded
            s = e
        for j, i in enumerate(blk):
            if res[j] != bufs[j].nbytes:
                good[i] = False
        if staged is not None:
            self._unstage(t, staged, good)
        # A block is usable only if every block before it is: vLLM recomputes
        # from the first bad one, and we report every block from there on.
        bad_from = good.index(False) if False in good else len(good)
        n_ok = bad_from
        per_block = self.block_bytes
        self.stats.add(loaded_blocks=n_ok, loaded_bytes=n_ok * per_block,
                       load_failed_blocks=len(good) - n_ok,
                       load_ms=(time.perf_counter() - t0) * 1e3)
        with self._lock:  # after the stats: they travel in the same step
            for i in range(bad_from, len(good)):
                self._load_errors.update(b for b in t.block_ids[i] if b != _NULL_BLOCK)
            self._done_loads.add(t.req_id)
        if n_ok < len(good):
            logger.warning("OpenLake: request %s: %d of %d blocks could not be loaded; "
                           "vLLM recomputes them", t.req_id, len(good) - n_ok, len(good))

    def _do_save(self, job: _Job) -> None:
        t = job.t
        t0 = time.perf_counter()
        staged = self._stage(t, load=False)
        # Per block: 0 stored, 1 dropped (store under pressure), 2 failed.
        state = [0] * len(t.prefixes)
        nbytes = 0
        keys, bufs, blk = self._io_lists(t, staged)
        res = self.store.put(keys, bufs)
        for j, i in enumerate(blk):
            r = res[j]
            if r in (0, 1):  # OK, EXISTS
                nbytes += bufs[j].nbytes
            elif r in (None, 3, 11, 4):  # down, NOSPACE, QUOTA, BUSY
                state[i] = max(state[i], 1)
            else:
                state[i] = 2
        stored = state.count(0)
        self.stats.add(saved_blocks=stored, saved_bytes=nbytes,
                       save_dropped_blocks=state.count(1), save_failed_blocks=state.count(2),
                       save_ms=(time.perf_counter() - t0) * 1e3)
        with self._lock:
            if stored == len(state):
                self._stored_jobs[t.job_id] = self._stored_jobs.get(t.job_id, 0) + 1
            self._finish_save_locked(job, dropped=False)
            self._lock.notify_all()

    def _finish_save_locked(self, job: _Job, dropped: bool) -> None:
        if job.done:
            return
        job.done = True
        per_block = self.block_bytes
        self._pending_save_bytes -= per_block * len(job.t.block_ids)
        n = self._inflight_saves.get(job.t.req_id, 0) - 1
        if n > 0:
            self._inflight_saves[job.t.req_id] = n
        else:
            self._inflight_saves.pop(job.t.req_id, None)
        if dropped:
            self.stats.add(save_dropped_blocks=len(job.t.block_ids))
