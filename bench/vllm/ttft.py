#!/usr/bin/env python3
"""Time to first token on CPU: recompute vs KV loaded through a KV connector.

    ttft.py run    [options]          orchestrate a whole run (run_ttft.sh calls it)
    ttft.py engine SPEC.json OUT.json one vLLM engine in this process (run calls it)
    ttft.py report RESULT.json [--doc docs/benchmarks.md]   markdown (+ doc section)

Model: bench/vllm/model/config.json, a 6-layer Llama (hidden 768, 12 heads of
64, no GQA, MLP 8192, vocab 32000), bf16, with seeded random weights from
tests/vllm/make_model.py (written once to $TMPDIR/openlake-ttft-model-*/, 0.7 GB;
the first token depends on every KV byte, so a warm answer can be compared
with the recomputed one). KV per token:
2 (K, V) x 6 layers x 12 heads x 64 x 2 bytes = 18 KiB.

Systems (--systems; each engine is its own process, in-process engine core,
VLLM_ENABLE_V1_MULTIPROCESSING=0, so the connector's scheduler and worker
halves run in the process that times them):
  cold          no connector: every prompt prefilled (recompute)
  openlake      OpenLakeConnector, device "local" (Unix socket + shared slab)
                against the openlaked that run_ttft.sh started
  openlake-remote  the same connector and device against node A of a
                two-node cluster (bench/vllm/remote.py) while the prefix
                lives on node B only: populated through B, then each round a
                fresh node A (empty): the connector's lookup makes A ask B
                whether it has the keys (EXISTS), and the worker's load makes
                A fetch every block from B over the node RPC (TCP, between
                two network namespaces when run_ttft.sh made them). Node A's
                openlake_kvpool_fetched_keys_total is read around each prompt
                (the keys that crossed), B's served_gets_total (value
                KV_GET calls) per engine.
  lmcache       LMCache's multi-process server (python -m
                lmcache.v1.multiprocess.server, started by run_ttft.sh) and
                vLLM's LMCacheMPConnector; the in-process LMCacheConnectorV1
                has no CPU path in LMCache 0.5.6 (probe lmcache-inproc)
  vllm-example  vLLM's ExampleConnector (safetensors files per request and
                layer, here on tmpfs): vLLM's only built-in connector that
                keeps KV across an engine restart on CPU; an example, not a
                product
  vllm-native, vllm-simple, lmcache-inproc: probed only (one engine each,
                one prompt twice in the same engine with vLLM's prefix cache
                reset in between); their error (or hit count) is recorded.
                Should one of them ever work, it is measured the only way an
                in-process cache can be: same engine, after reset_prefix_cache.

Method. Populate once per warm system: one engine computes and saves every
prompt (its TTFT is reported as "first prefill with the connector"). Then
ROUNDS rounds; each round, in an order rotating from round to round: one cold
engine (all prompt lengths, one generate() each), and for each warm system
one fresh engine (an engine restart: vLLM's own prefix cache is empty) that
loads every prompt. TTFT = wall time of LLM.generate() of that one prompt
with max_tokens=1; engine start-up is reported separately. Every engine first
runs a 512-token warm-up prompt (also populated, so in warm engines the load
path is warm too). Ratios are per round, reported as median (min-max).

Copy time, per warm prompt, measured by wrapping the worker half of whatever
connector is loaded (no connector code changed): for a connector that loads
asynchronously (the request waits in WAITING_FOR_REMOTE_KVS), from entering
the first start_load_kv() of the request's first step to the get_finished()
that reports the load done; for one that loads synchronously, the time spent
in start_load_kv() and wait_for_layer_load(). OpenLakeConnector also reports
its own load time (vllm:openlake_load_ms: staging, the checked copy out of
the slab, unstaging) and bytes. Ceiling: single-thread memcpy (numpy copyto)
of the same bytes (cached tokens x KV bytes per token) between pre-faulted
buffers, measured in this process in every round.

Correctness: each warm prompt's first token and its logprob are compared with
the cold engine's for the same prompt (bf16; the run flags a token mismatch).
"""
import argparse
import json
import os
import random
import signal
import statistics
import subprocess
import sys
import time

import remote  # bench/vllm/remote.py: the openlake-remote cluster

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
MODEL = os.path.join(HERE, "model")
WARMUP_LEN = 512

# ---------------------------------------------------------------------------
# Shared helpers
# ---------------------------------------------------------------------------


def model_config(model_dir):
    with open(os.path.join(model_dir, "config.json")) as f:
        return json.load(f)


def kv_bytes_per_token(cfg, dtype):
    hd = cfg.get("head_dim") or cfg["hidden_size"] // cfg["num_attention_heads"]
    elem = {"bfloat16": 2, "float16": 2, "float32": 4}[dtype]
    return 2 * cfg["num_hidden_layers"] * cfg["num_key_value_heads"] * hd * elem


def prompt_ids(length, seed, vocab):
    r = random.Random(f"openlake-ttft-{seed}-{length}")
    return [r.randrange(3, vocab) for _ in range(length)]


def last_error_line(text):
    """The last 'SomethingError: ...' / 'Exception: ...' line of a traceback."""
    best = None
    for line in text.splitlines():
        s = line.strip()
        if s.startswith("[rank0]:"):
            s = s[len("[rank0]:"):].strip()
        head = s.split(":", 1)[0]
        if ":" in s and (head.endswith("Error") or head.endswith("Exception")) and " " not in head:
            best = s
    return best[:300] if best else (text.strip().splitlines() or ["(no output)"])[-1][:300]


# ---------------------------------------------------------------------------
# engine: one vLLM engine in this process
# ---------------------------------------------------------------------------


def _patch_vllm_rebind():
    """vLLM 0.32 (CPU) scans every loaded module for Triton kernels to rebind
    and calls vars(value).get() on each attribute; llvmlite's ffi.lib (loaded
    by numba, which LMCache imports) has a __dict__ that is not a dict, and
    engine start fails with "'_lib_fn_wrapper' object has no attribute 'get'".
    Same scan, skipping such values. Applied in every engine, whatever the
    system, so all run the same code."""
    import vllm.triton_utils.dispatcher as d

    def rebind(overrides):
        originals = {id(o): w for o, w in overrides}
        for module in list(sys.modules.values()):
            ns = getattr(module, "__dict__", None)
            if not isinstance(ns, dict):
                continue
            for attr, value in list(ns.items()):
                w = originals.get(id(value))
                if w is not None:
                    setattr(module, attr, w)
                    continue
                try:
                    inner = vars(value).get("kernel") if hasattr(value, "__dict__") else None
                except Exception:
                    continue
                w = originals.get(id(inner)) if inner is not None else None
                if w is None:
                    continue
                value.kernel = w
                if not isinstance(value, type):
                    value.__dict__.pop("_kernel_arg_names", None)

    d._rebind_kernels = rebind


class ConnTimer:
    """Timings of the connector's hooks during one generate()."""

    def __init__(self):
        self.reset()

    def reset(self):
        self.start_t = self.end_t = None  # generate() called / returned
        self.first_load_t = None   # entry of the first start_load_kv()
        self.recv_done_t = None    # get_finished() first reporting a finished load
        self.sync_load_s = 0.0     # time inside start_load_kv() + wait_for_layer_load()
        self.save_s = 0.0          # time inside save_kv_layer() + wait_for_save()
        self.lookup_s = 0.0        # time inside get_num_new_matched_tokens()

    def result(self):
        window = (self.recv_done_t - self.first_load_t
                  if self.recv_done_t is not None and self.first_load_t is not None else None)
        pre = post = None
        if self.start_t is not None and self.end_t is not None and self.first_load_t is not None:
            pre = self.first_load_t - self.start_t
            post = self.end_t - (self.recv_done_t if window is not None
                                 else self.first_load_t + self.sync_load_s)
        return {
            "before_load_s": None if pre is None else round(pre, 6),
            "after_load_s": None if post is None else round(post, 6),
            "async_load_s": None if window is None else round(window, 6),
            "sync_load_s": round(self.sync_load_s, 6),
            "copy_s": round(window if window is not None else self.sync_load_s, 6),
            "save_s": round(self.save_s, 6),
            "lookup_s": round(self.lookup_s, 6),
        }


TIMER = ConnTimer()


def _instrument_connectors():
    from vllm.distributed.kv_transfer.kv_connector.factory import KVConnectorFactory
    from vllm.distributed.kv_transfer.kv_connector.v1.base import KVConnectorRole

    orig = KVConnectorFactory.create_connector.__func__

    def timed(obj, name, on_enter=None, on_result=None, acc=None):
        fn = getattr(obj, name, None)
        if fn is None:
            return

        def wrapper(*a, **k):
            t0 = time.perf_counter()
            if on_enter:
                on_enter(t0)
            r = fn(*a, **k)
            t1 = time.perf_counter()
            if acc:
                setattr(TIMER, acc, getattr(TIMER, acc) + (t1 - t0))
            if on_result:
                on_result(r, t1)
            return r

        setattr(obj, name, wrapper)

    def first_load(t):
        if TIMER.first_load_t is None:
            TIMER.first_load_t = t

    def finished(r, t):
        try:
            recving = r[1]
        except (TypeError, IndexError):
            return
        if recving and TIMER.recv_done_t is None:
            TIMER.recv_done_t = t

    def create_connector(cls, config, role, kv_cache_config):
        c = orig(cls, config, role, kv_cache_config)
        if role == KVConnectorRole.WORKER:
            timed(c, "start_load_kv", on_enter=first_load, acc="sync_load_s")
            timed(c, "wait_for_layer_load", acc="sync_load_s")
            timed(c, "get_finished", on_result=finished)
            timed(c, "save_kv_layer", acc="save_s")
            timed(c, "wait_for_save", acc="save_s")
        else:
            timed(c, "get_num_new_matched_tokens", acc="lookup_s")
        return c

    KVConnectorFactory.create_connector = classmethod(create_connector)


def _metrics(llm):
    from vllm.v1.metrics.reader import Counter, Histogram

    out = {}
    for m in llm.get_metrics():
        if isinstance(m, Counter):
            out[m.name] = out.get(m.name, 0) + m.value
        elif isinstance(m, Histogram) and m.name.startswith("vllm:openlake_"):
            out[m.name + "_sum"] = out.get(m.name + "_sum", 0) + m.sum
            out[m.name + "_count"] = out.get(m.name + "_count", 0) + m.count
    return out


_KEEP = ("vllm:prefix_cache_hits", "vllm:external_prefix_cache_hits", "vllm:prompt_tokens",
         "vllm:openlake_hit_tokens", "vllm:openlake_loaded_blocks", "vllm:openlake_loaded_bytes",
         "vllm:openlake_load_failed_blocks", "vllm:openlake_saved_blocks",
         "vllm:openlake_saved_bytes", "vllm:openlake_save_dropped_blocks",
         "vllm:openlake_load_ms_sum", "vllm:openlake_load_ms_count")


# Node A's KV pool counters read around each prompt (openlake-remote).
_NODE_KEEP = ("fetched_keys_total", "fetch_misses_total", "fetch_failures_total")
NODE_URL = None


def _one(llm, sp, ids, label):
    before = _metrics(llm)
    node0 = remote.metrics(NODE_URL) if NODE_URL else None
    TIMER.reset()
    t = TIMER.start_t = time.perf_counter()
    outs = llm.generate([{"prompt_token_ids": ids}], sp, use_tqdm=False)
    TIMER.end_t = time.perf_counter()
    ttft = TIMER.end_t - t
    after = _metrics(llm)
    o = outs[0]
    c = o.outputs[0]
    tok = c.token_ids[0]
    lp = c.logprobs[0][tok].logprob if c.logprobs else None
    d = {k: after.get(k, 0) - before.get(k, 0) for k in _KEEP if k in after}
    if node0 is not None:
        node1 = remote.metrics(NODE_URL)
        d.update({"node_" + k: remote.kvpool(node1, k) - remote.kvpool(node0, k) for k in _NODE_KEEP})
    r = {"label": label, "len": len(ids), "ttft_s": round(ttft, 6),
         "num_cached_tokens": int(o.num_cached_tokens or 0), "token": int(tok),
         "logprob": None if lp is None else float(lp), "conn": TIMER.result(), "counters": d}
    if "vllm:openlake_load_ms_sum" in d:
        r["openlake_load_s"] = round(d["vllm:openlake_load_ms_sum"] / 1e3, 6)
        r["openlake_loaded_bytes"] = int(d.get("vllm:openlake_loaded_bytes", 0))
    print(f"[{label}] len {len(ids)} ttft {ttft:.3f}s cached {r['num_cached_tokens']} "
          f"copy {r['conn']['copy_s']:.4f}s lookup {r['conn']['lookup_s']:.4f}s"
          + (f" fetched keys {d['node_fetched_keys_total']}" if node0 is not None else ""),
          file=sys.stderr, flush=True)
    return r


def engine(spec_path, out_path):
    global NODE_URL
    t0 = time.perf_counter()
    with open(spec_path) as f:
        spec = json.load(f)
    NODE_URL = spec.get("node_url")
    os.environ.update({k: str(v) for k, v in spec.get("env", {}).items()})
    import vllm
    from vllm import LLM, SamplingParams
    from vllm.config import KVTransferConfig

    _patch_vllm_rebind()
    _instrument_connectors()
    kw = dict(model=spec["model"], load_format=spec.get("load_format", "safetensors"),
              skip_tokenizer_init=True, generation_config="vllm", dtype=spec["dtype"],
              max_model_len=spec["max_model_len"], enforce_eager=True, seed=0,
              disable_log_stats=False)
    if spec.get("kv_transfer_config"):
        kw["kv_transfer_config"] = KVTransferConfig(**spec["kv_transfer_config"])
    kw.update(spec.get("llm_kwargs", {}))
    llm = LLM(**kw)
    init_s = time.perf_counter() - t0
    sp = SamplingParams(max_tokens=1, temperature=0.0, ignore_eos=True, logprobs=0)
    vocab = spec["vocab"]
    out = {"system": spec["system"], "phase": spec["phase"], "vllm_version": vllm.__version__,
           "block_size": llm.llm_engine.vllm_config.cache_config.block_size,
           "init_s": round(init_s, 3), "prompts": []}
    out["warmup"] = _one(llm, sp, prompt_ids(WARMUP_LEN, "warmup", vocab), "warmup")
    for n in spec["lens"]:
        out["prompts"].append(_one(llm, sp, prompt_ids(n, spec["seed"], vocab), f"{spec['phase']}"))
        if spec["phase"] == "inproc":
            # An in-process cache cannot survive a restart: the same engine,
            # vLLM's own prefix cache emptied, the same prompt again.
            for _ in range(100):
                if llm.reset_prefix_cache():
                    break
                time.sleep(0.05)
            out["prompts"][-1]["again"] = _one(llm, sp, prompt_ids(n, spec["seed"], vocab), "again")
    if spec["phase"] == "populate":
        # Let asynchronous saves finish: a few engine steps, no new blocks.
        for i in range(6):
            time.sleep(0.5)
            llm.generate([{"prompt_token_ids": prompt_ids(16, f"drain{i}", vocab)}], sp,
                         use_tqdm=False)
    out["total_s"] = round(time.perf_counter() - t0, 3)
    try:
        out["rss_max_mib"] = round(int(open("/proc/self/status").read().split("VmHWM:")[1]
                                       .split()[0]) / 1024, 1)
    except (OSError, IndexError, ValueError):
        pass
    tmp = out_path + ".tmp"
    with open(tmp, "w") as f:
        json.dump(out, f, indent=1)
    os.replace(tmp, out_path)
    sys.stdout.flush()
    sys.stderr.flush()
    # Let connectors' atexit hooks (pending saves) run, then exit.
    return 0


# ---------------------------------------------------------------------------
# run: the orchestrator
# ---------------------------------------------------------------------------

WARM = ("openlake", "openlake-remote", "lmcache", "vllm-example")
PROBE = ("vllm-native", "vllm-simple", "lmcache-inproc")


def cpu_seconds(pid):
    if not pid:
        return None
    try:
        f = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
        tck = os.sysconf("SC_CLK_TCK")
        return (int(f[11]) + int(f[12])) / tck  # utime + stime, all threads
    except (OSError, IndexError, ValueError):
        return None


EVICT_BYTES = 128 << 20  # 4x this machine's L3


def memcpy_s(nbytes, reps=5):
    """Median seconds of one single-thread copy of nbytes between pre-faulted
    buffers (numpy copyto), caches flushed before each copy, and GB/s."""
    import numpy as np

    src = np.empty(nbytes, dtype=np.uint8)
    src.fill(1)
    dst = np.empty(nbytes, dtype=np.uint8)
    dst.fill(0)
    scratch = np.empty(EVICT_BYTES, dtype=np.uint8)
    ts = []
    for i in range(reps):
        scratch.fill(i)  # push src and dst out of the caches: DRAM to DRAM, like a load
        t = time.perf_counter()
        np.copyto(dst, src)
        ts.append(time.perf_counter() - t)
    if not (dst[:: max(1, nbytes // 4096)] == 1).all():
        raise RuntimeError("memcpy check failed")
    s = statistics.median(ts)
    return {"bytes": nbytes, "s": round(s, 6), "gbs": round(nbytes / s / 1e9, 2)}


class Runner:
    def __init__(self, a):
        self.a = a
        self.cfg = model_config(a.model)
        self.lens = [int(x) for x in a.lens.split(",")]
        self.kvpt = kv_bytes_per_token(self.cfg, a.dtype)
        self.max_model_len = max(self.lens + [WARMUP_LEN]) + 256
        os.makedirs(a.work, exist_ok=True)
        self.seq = 0
        preload = []
        if a.preload:
            for p in a.preload.split(":"):
                if p and os.path.exists(p):
                    preload.append(p)
        self.env = {
            "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "VLLM_NO_USAGE_STATS": "1",
            "DO_NOT_TRACK": "1", "TOKENIZERS_PARALLELISM": "false",
            "VLLM_ENABLE_V1_MULTIPROCESSING": "0",
            "VLLM_CPU_KVCACHE_SPACE": str(a.kv_space_gib),
        }
        self.preload = ":".join(preload)
        self.weights_dir = None
        self.remote = None          # remote.RemoteCluster (openlake-remote)

    def prepare_model(self):
        """Seeded weights for the config (tests/vllm/make_model.py), written
        once to $TMPDIR/openlake-ttft-model-<hash of config and script>/ and
        reused by later runs (~0.7 GB)."""
        if self.a.dummy_weights:
            self.weights_dir = os.path.abspath(self.a.model)
            return
        import hashlib
        import shutil
        import tempfile

        make = os.path.join(ROOT, "tests", "vllm", "make_model.py")
        h = hashlib.sha256()
        for f in (os.path.join(self.a.model, "config.json"), make):
            with open(f, "rb") as fh:
                h.update(fh.read())
        out = os.path.join(tempfile.gettempdir(), f"openlake-ttft-model-{h.hexdigest()[:16]}")
        if not os.path.exists(os.path.join(out, "model.safetensors")):
            t = time.perf_counter()
            tmp = tempfile.mkdtemp(prefix=".openlake-ttft-", dir=tempfile.gettempdir())
            try:
                subprocess.run([self.a.python, make, tmp, os.path.join(self.a.model, "config.json")],
                               check=True)
                os.chmod(tmp, 0o755)
                os.rename(tmp, out)
            finally:
                shutil.rmtree(tmp, ignore_errors=True)
            print(f"ttft: seeded weights written to {out} ({time.perf_counter() - t:.1f}s)",
                  file=sys.stderr, flush=True)
        self.weights_dir = out

    def system_cfg(self, system, phase):
        """(python, kv_transfer_config, extra env, llm_kwargs) or raises KeyError."""
        a = self.a
        py = a.python
        ktc, env, kw = None, {}, {}
        if system == "cold":
            pass
        elif system == "openlake":
            ktc = {"kv_connector": "OpenLakeConnector",
                   "kv_connector_module_path": "openlake_client.openlake_connector",
                   "kv_role": "kv_both",
                   "kv_connector_extra_config": {
                       "openlake_nodes": [a.openlake_addr], "openlake_device": "local",
                       "openlake_socket": a.openlake_socket,
                       "openlake_token_file": a.openlake_token_file}}
        elif system == "openlake-remote":
            # Populate through node B (A is down); measure through node A.
            n = self.remote.nodes[2 if phase == "populate" else 1]
            ktc = {"kv_connector": "OpenLakeConnector",
                   "kv_connector_module_path": "openlake_client.openlake_connector",
                   "kv_role": "kv_both",
                   "kv_connector_extra_config": {
                       "openlake_nodes": [n["kv_addr"]], "openlake_device": "local",
                       "openlake_socket": n["sock"], "openlake_token_file": self.remote.token}}
        elif system == "lmcache":
            py = a.lmcache_python
            ktc = {"kv_connector": "LMCacheMPConnector", "kv_role": "kv_both",
                   "kv_connector_extra_config": {"lmcache.mp.host": "tcp://127.0.0.1",
                                                 "lmcache.mp.port": a.lmcache_port}}
        elif system == "lmcache-inproc":
            py = a.lmcache_python
            ktc = {"kv_connector": "LMCacheConnectorV1", "kv_role": "kv_both"}
            env = {"LMCACHE_CHUNK_SIZE": "256", "LMCACHE_LOCAL_CPU": "True",
                   "LMCACHE_MAX_LOCAL_CPU_SIZE": str(a.store_gib)}
        elif system == "vllm-example":
            ktc = {"kv_connector": "ExampleConnector", "kv_role": "kv_both",
                   "kv_connector_extra_config": {"shared_storage_path": a.example_dir}}
            # It keeps one file per layer per prompt, written by the last
            # prefill step: with chunked prefill (vLLM's CPU default, 4096
            # tokens a step) a longer prompt's files hold its last chunk only
            # and the load fails ("shape mismatch"). One step per prompt.
            kw = {"max_num_batched_tokens": self.max_model_len}
        elif system == "vllm-native":
            kw = {"kv_offloading_size": a.store_gib, "kv_offloading_backend": "native"}
        elif system == "vllm-simple":
            kw = {"kv_offloading_size": a.store_gib, "kv_offloading_backend": "native"}
            env = {"VLLM_USE_SIMPLE_KV_OFFLOAD": "1"}
        else:
            raise KeyError(system)
        return py, ktc, env, kw

    def engine(self, system, phase, lens):
        if system != "openlake-remote" or phase == "populate":
            return self.engine1(system, phase, lens)
        # A fresh node A for every measured engine: it holds nothing, so
        # every block the engine loads is fetched from node B.
        try:
            a = self.remote.start_a()
        except Exception as e:  # noqa: BLE001  (recorded: the engine did not run)
            self.remote.stop_a()
            print(f"ttft: {system} {phase}: FAILED (node A did not start: {e})", file=sys.stderr, flush=True)
            return {"ok": False, "error": f"node A did not start: {e}"}
        try:
            m_a0, m_b0 = remote.metrics(a["url"]), remote.metrics(self.remote.nodes[2]["url"])
            held = remote.kv_held(a["url"])
            out = self.engine1(system, phase, lens, node_url=a["url"])
            m_a1, m_b1 = remote.metrics(a["url"]), remote.metrics(self.remote.nodes[2]["url"])
        finally:
            self.remote.stop_a()
        if out["ok"]:
            out["node_a"] = {k: remote.kvpool(m_a1, k) - remote.kvpool(m_a0, k)
                             for k in ("fetched_keys_total", "fetch_misses_total",
                                       "fetch_failures_total", "fetched_later_home_total",
                                       "pushes_total")}
            out["node_a"]["held_bytes_before"] = held   # 0: A held nothing
            out["node_b"] = {k: remote.kvpool(m_b1, k) - remote.kvpool(m_b0, k)
                             for k in ("served_gets_total", "served_puts_total")}
            print(f"ttft: {system} {phase}: node A {out['node_a']}, node B {out['node_b']}",
                  file=sys.stderr, flush=True)
        return out

    def engine1(self, system, phase, lens, node_url=None):
        py, ktc, env, kw = self.system_cfg(system, phase)
        if not py or not os.path.exists(py):
            return {"ok": False, "error": f"no python for {system} ({py})"}
        self.seq += 1
        base = os.path.join(self.a.work, f"{self.seq:03d}-{system}-{phase}")
        spec = {"system": system, "phase": phase, "model": self.weights_dir,
                "load_format": "dummy" if self.a.dummy_weights else "safetensors",
                "dtype": self.a.dtype, "max_model_len": self.max_model_len,
                "vocab": self.cfg["vocab_size"], "lens": lens, "seed": self.a.seed,
                "kv_transfer_config": ktc, "llm_kwargs": kw, "env": {**self.env, **env},
                "node_url": node_url}
        with open(base + ".spec.json", "w") as f:
            json.dump(spec, f)
        penv = dict(os.environ)
        penv.update(spec["env"])
        if self.preload:
            penv["LD_PRELOAD"] = self.preload
        cpu0 = {n: cpu_seconds(p) for n, p in self.servers().items()}
        t = time.perf_counter()
        self.signal_others(system, signal.SIGSTOP)
        try:
            with open(base + ".log", "w") as log:
                try:
                    rc = subprocess.run([py, os.path.abspath(__file__), "engine",
                                         base + ".spec.json", base + ".out.json"],
                                        stdout=log, stderr=subprocess.STDOUT, env=penv,
                                        cwd=self.a.work, timeout=self.a.engine_timeout).returncode
                except subprocess.TimeoutExpired:
                    rc = "timeout"
        finally:
            self.signal_others(system, signal.SIGCONT)
        wall = time.perf_counter() - t
        cpu1 = {n: cpu_seconds(p) for n, p in self.servers().items()}
        text = open(base + ".log", errors="replace").read()
        self.remove_dist_files(text)
        if rc != 0 or not os.path.exists(base + ".out.json"):
            err = last_error_line(text) if rc != "timeout" else f"timed out after {self.a.engine_timeout}s"
            print(f"ttft: {system} {phase}: FAILED ({err}); log {base}.log", file=sys.stderr, flush=True)
            return {"ok": False, "error": err, "log": base + ".log", "wall_s": round(wall, 1)}
        out = json.load(open(base + ".out.json"))
        out["ok"] = True
        out["wall_s"] = round(wall, 1)
        out["server_cpu_s"] = {n: round(cpu1[n] - cpu0[n], 3) for n in cpu0
                               if cpu0[n] is not None and cpu1.get(n) is not None}
        # LMCache in-process logs its CPU failure and carries on with no hits.
        if "No supported cpu connector found" in text:
            out["note"] = "RuntimeError: No supported cpu connector found. (LMCache, logged; engine ran without it)"
        ps = ", ".join(f"{p['len']}: {p['ttft_s']:.3f}s/{p['num_cached_tokens']}" for p in out["prompts"])
        print(f"ttft: {system} {phase}: init {out['init_s']}s; ttft/cached {ps}", file=sys.stderr, flush=True)
        return out

    @staticmethod
    def remove_dist_files(log):
        """vLLM leaves /tmp/vllm_dist_<id> and, when an engine dies,
        /dev/shm/vllm_dist_<id>-*: remove this engine's (its id is in its log)."""
        import glob
        import re

        for ident in set(re.findall(r"file:///tmp/vllm_dist_([0-9a-f]{32})", log)):
            for f in [f"/tmp/vllm_dist_{ident}"] + glob.glob(f"/dev/shm/vllm_dist_{ident}*"):
                try:
                    os.unlink(f)
                except OSError:
                    pass

    # The server each system talks to; the others are paused (SIGSTOP) while
    # its engine runs, so an idle peer server takes no CPU from the one measured.
    SERVER_OF = {"openlake": ("openlaked",), "lmcache": ("lmcache_server",),
                 "openlake-remote": ("etcd", "openlaked-a", "openlaked-b")}

    def signal_others(self, system, sig):
        for name, pid in self.servers().items():
            if name not in self.SERVER_OF.get(system, ()):
                try:
                    os.kill(pid, sig)
                except OSError:
                    pass

    def servers(self):
        s = {}
        if self.a.openlake_pid:
            s["openlaked"] = self.a.openlake_pid
        if self.a.lmcache_pid:
            s["lmcache_server"] = self.a.lmcache_pid
        if self.remote:
            s.update(self.remote.pids())
        return s

    def run(self):
        a = self.a
        # Killed (run_ttft.sh's cleanup, Ctrl-C): stop the cluster's
        # processes too (etcd is in no namespace the script cleans).
        signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
        if "openlake-remote" in a.systems.split(","):
            self.remote = remote.RemoteCluster(a.work, a.store_gib, a.remote_kv_timeout_ms,
                                               a.remote_ns_a, a.remote_ns_b, a.remote_ip_a,
                                               a.remote_ip_b, a.remote_etcd_ip)
            self.remote.start()
        try:
            return self.run1()
        finally:
            if self.remote:
                self.remote.stop()

    def run1(self):
        a = self.a
        systems = [s for s in a.systems.split(",") if s]
        warm = [s for s in systems if s in WARM]
        probes = [s for s in systems if s in PROBE]
        machine = json.loads(subprocess.run([sys.executable, os.path.join(ROOT, "bench", "http", "machine.py")],
                                            capture_output=True, text=True, cwd=ROOT).stdout or "{}")
        self.prepare_model()
        res = {"machine": machine, "model": self.cfg, "model_dir": os.path.relpath(a.model, ROOT),
               "dtype": a.dtype, "kv_bytes_per_token": self.kvpt, "lens": self.lens,
               "max_model_len": self.max_model_len, "kv_space_gib": a.kv_space_gib,
               "store_gib": a.store_gib, "preload": self.preload, "rounds_requested": a.rounds,
               "kmp_blocktime": os.environ.get("KMP_BLOCKTIME"),
               "systems": systems, "versions": a.versions and json.loads(a.versions) or {},
               "started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
               "loadavg_start": os.getloadavg(),
               "status": {}, "populate": {}, "inproc": {}, "rounds": [],
               "remote": self.remote.describe() if self.remote else None}
        # Probes: does it run at all on this platform?
        for s in probes:
            o = self.engine(s, "inproc", [min(self.lens)])
            res["probe_" + s] = o
            if o["ok"]:
                hit = o["prompts"][0].get("again", {}).get("num_cached_tokens", 0)
                if hit > 0 and not o.get("note"):
                    res["status"][s] = {"state": "runs", "detail": f"same-engine hit {hit} tokens"}
                else:
                    res["status"][s] = {"state": "no hits",
                                        "detail": o.get("note") or "engine runs, 0 tokens loaded"}
            else:
                res["status"][s] = {"state": "fails", "detail": o["error"]}
        inproc = [s for s in probes if res["status"][s]["state"] == "runs"]
        # Populate each warm system once.
        for s in warm:
            o = self.engine(s, "populate", self.lens)
            res["populate"][s] = o
            if not o["ok"]:
                res["status"][s] = {"state": "fails", "detail": o["error"]}
        warm = [s for s in warm if res["populate"][s]["ok"]]
        order = ["cold"] + warm + inproc + ["memcpy"]
        for r in range(a.rounds):
            k = r % len(order)
            rd = {"round": r + 1, "order": order[k:] + order[:k]}
            for s in rd["order"]:
                if s == "memcpy":
                    rd["memcpy"] = {}
                    continue  # measured below, per warm system's bytes
                phase = "cold" if s == "cold" else ("inproc" if s in inproc else "warm")
                rd[s] = self.engine(s, phase, self.lens)
            # memcpy of the bytes each warm system loaded, and of the whole prompt's KV
            sizes = set()
            for n in self.lens:
                sizes.add(n * self.kvpt)
            for s in warm + inproc:
                o = rd.get(s) or {}
                for p in o.get("prompts", []):
                    p = p.get("again", p)
                    if p["num_cached_tokens"]:
                        sizes.add(p["num_cached_tokens"] * self.kvpt)
            rd["memcpy"] = {str(b): memcpy_s(b) for b in sorted(sizes)}
            res["rounds"].append(rd)
            self.save(res)
        for s in warm + inproc:
            ok = [rd[s] for rd in res["rounds"] if rd.get(s, {}).get("ok")]
            if not ok:
                res["status"][s] = {"state": "fails", "detail": next(
                    (rd[s].get("error") for rd in res["rounds"] if s in rd), "no rounds")}
            else:
                hits = [p.get("again", p)["num_cached_tokens"] for p in ok[0]["prompts"]]
                res["status"].setdefault(s, {"state": "runs", "detail": f"cached tokens {hits}"})
        res["status"]["cold"] = {"state": "runs", "detail": "no connector"}
        res["finished"] = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        res["loadavg_finish"] = os.getloadavg()
        self.save(res)
        return res

    def save(self, res):
        tmp = self.a.out + ".tmp"
        with open(tmp, "w") as f:
            json.dump(res, f, indent=1)
        os.replace(tmp, self.a.out)


# ---------------------------------------------------------------------------
# report
# ---------------------------------------------------------------------------

LABEL = {
    "cold": "recompute (no connector)",
    "openlake": "OpenLake (`OpenLakeConnector`, local)",
    "openlake-remote": "OpenLake, prefix on another node (fetched over the node RPC)",
    "lmcache": "LMCache 0.5.6 MP server (`LMCacheMPConnector`)",
    "lmcache-inproc": "LMCache 0.5.6 in-process (`LMCacheConnectorV1`)",
    "vllm-example": "vLLM `ExampleConnector` (files on tmpfs; prefill unchunked)",
    "vllm-native": "vLLM native CPU offloading (`OffloadingConnector`)",
    "vllm-simple": "vLLM `SimpleCPUOffloadConnector`",
}


def _mmm(xs, fmt="{:.2f}"):
    xs = [x for x in xs if x is not None]
    if not xs:
        return "–"
    if len(xs) == 1:
        return fmt.format(xs[0])
    return f"{fmt.format(statistics.median(xs))} ({fmt.format(min(xs))}–{fmt.format(max(xs))})"


def remote_table(res, rounds):
    """openlake-remote against recompute and against the local hit
    (openlake), per round, with node A's fetched-key counts (issue 38)."""
    med = statistics.median
    kvpt = res["kv_bytes_per_token"]
    rc = res.get("remote") or {}
    net = ("two network namespaces on a bridge (veth), TCP" if rc.get("network") == "namespaces"
           else "loopback TCP")
    L = [f"Prefix on another node (issue 38): node A (the engine's, shared memory) and node B in "
         f"one cluster (etcd, cluster secret, `cluster.kv_replicas` {rc.get('kv_replicas')}, "
         f"`cluster.kv_timeout_ms` {rc.get('kv_timeout_ms')}: how long A may take to ask B "
         "whether it has a LOOKUP's keys, or to fetch an ACQUIRE's, before what did not come is a "
         f"miss), {net}, each `--threads 1` on CPU 0. "
         "The prompts were saved through node B while A was down (B alone in the cluster holds "
         "them); before each round's engine a fresh node A (empty data dir) joins, and after it "
         "stops. The connector's lookup (scheduler) asks A, which asks B only whether it has the "
         "keys (KV_GET with EXISTS: no value moves); the worker's load then asks A in parts of "
         "32 MiB (`openlake_load_part_mb`), and A fetches each part from B (KV_GET) while the "
         "load waits. "
         "Keys fetched: node A's `openlake_kvpool_fetched_keys_total` "
         "around the prompt's `generate()` (one key per block and layer); misses and failures: "
         "its `_fetch_misses_total`, `_fetch_failures_total` (per round). Cached tokens short of "
         "the prompt: a miss cut the prefix there, the rest was recomputed. Lookup: time in the "
         "connector's `get_num_new_matched_tokens` (scheduler side); load wait as above, here "
         "A's fetches from B and the copies out of A's slab. Fetched GB/s: the keys' bytes over "
         "the load wait. ÷ local hit: this TTFT over the same round's "
         "OpenLake local hit. Goals (issue 38): ≥ 10× faster than recompute; ≤ 1.5× the local "
         "hit's TTFT.", "",
         "| prompt | TTFT (s) | speed-up vs recompute | ÷ local hit | cached tokens | "
         "keys fetched from B | KV fetched (MiB) | misses / failures | lookup (ms) | "
         "load wait (ms) | fetched GB/s | load share of TTFT | first token = recompute |",
         "|---:|---:|---:|---:|---:|---:|---:|---|---:|---:|---:|---:|---|"]
    goal = []
    ok = [rd for rd in rounds if rd.get("openlake-remote", {}).get("ok")]
    held = [rd["openlake-remote"].get("node_a", {}).get("held_bytes_before") for rd in ok]
    served = [rd["openlake-remote"].get("node_b", {}).get("served_gets_total") for rd in ok]
    L[0] += (f" Node A held {max(h for h in held if h is not None) if any(h is not None for h in held) else '?'} "
             "bytes of values before each engine (`openlake_kv_tenant_used_bytes`, RAM and disk); "
             f"node B served {_mmm(served, '{:.0f}')} KV_GET calls for values per engine (warm-up prompt "
             "included; EXISTS calls not counted).")
    for i, n in enumerate(res["lens"]):
        if not ok:
            break
        ps = [rd["openlake-remote"]["prompts"][i] for rd in ok]
        ttft = [p["ttft_s"] for p in ps]
        spd = [rd["cold"]["prompts"][i]["ttft_s"] / p["ttft_s"] for rd, p in zip(ok, ps)]
        loc = [p["ttft_s"] / rd["openlake"]["prompts"][i]["ttft_s"] for rd, p in zip(ok, ps)
               if rd.get("openlake", {}).get("ok")]
        keys = [p["counters"].get("node_fetched_keys_total", 0) for p in ps]
        miss = [p["counters"].get("node_fetch_misses_total", 0) for p in ps]
        fail = [p["counters"].get("node_fetch_failures_total", 0) for p in ps]
        look = [p["conn"]["lookup_s"] for p in ps]
        fetch = [p["conn"]["copy_s"] for p in ps]
        same = sum(1 for rd, p in zip(ok, ps) if p["token"] == rd["cold"]["prompts"][i]["token"])
        nl = res["model"]["num_hidden_layers"]
        bs = ok[0]["openlake-remote"]["block_size"]   # a key: one block of one layer
        L.append(f"| {n // 1024}K | {_mmm(ttft, '{:.3f}')} | **{_mmm(spd, '{:.1f}')}×** | "
                 f"**{_mmm(loc, '{:.2f}')}×** | {_mmm([p['num_cached_tokens'] for p in ps], '{:.0f}')} | "
                 f"{_mmm(keys, '{:.0f}')} | "
                 f"{med(keys) * bs * kvpt / nl / 2**20:.0f} | "
                 f"{_mmm(miss, '{:.0f}')} / {_mmm(fail, '{:.0f}')} | {_mmm([f * 1e3 for f in look], '{:.1f}')} | "
                 f"{_mmm([f * 1e3 for f in fetch], '{:.1f}')} | "
                 f"{_mmm([k * bs * kvpt / nl / f / 1e9 for k, f in zip(keys, fetch) if f], '{:.2f}')} | "
                 f"{_mmm([f / t * 100 for f, t in zip(fetch, ttft)], '{:.1f}')}% | {same}/{len(ok)} |")
        if n >= 8192:
            g1 = med(spd) >= 10
            g2 = bool(loc) and med(loc) <= 1.5
            goal.append(f"{n // 1024}K: {med(spd):.1f}× faster than recompute ({'met' if g1 else 'NOT met'}: "
                        f"≥ 10), {med(loc) if loc else float('nan'):.2f}× the local hit "
                        f"({'met' if g2 else 'NOT met'}: ≤ 1.5)")
    if goal:
        L += ["", "Goal check, prefix on another node (medians): " + "; ".join(goal) + "."]
    return L


def report_remote(path):
    """The vllm-ttft-remote section: openlake-remote's figures with the run
    they come from (machine, date, command, load), or None."""
    res = json.load(open(path))
    rounds = [rd for rd in res["rounds"] if rd.get("cold", {}).get("ok")]
    if not any(rd.get("openlake-remote", {}).get("ok") for rd in rounds):
        return None
    m = res.get("machine", {})
    la = lambda k: "/".join(f"{x:.1f}" for x in res.get(k) or []) or "?"
    cmd = (f"LENS={','.join(map(str, res['lens']))} ROUNDS={res['rounds_requested']} "
           f"SYSTEMS={','.join(res['systems'])} bash bench/vllm/run_ttft.sh")
    L = [f"Run {res['started']} to {res.get('finished', '?')}, `{cmd}`; machine {m.get('cpu', '?')}, "
         f"{m.get('cores', '?')} cores (shared: load average 1/5/15 min {la('loadavg_start')} at the "
         f"start, {la('loadavg_finish')} at the end), vLLM {res.get('versions', {}).get('vllm', '?')} "
         f"(CPU), the model and method above; {len(rounds)} rounds, median (min–max) of "
         f"per-round values. Raw results: `bench/results/{os.path.basename(path)}` (not committed).",
         "", "| prompt | recompute TTFT (s) | local hit TTFT (s) |", "|---:|---:|---:|"]
    for i, n in enumerate(res["lens"]):
        loc = [rd["openlake"]["prompts"][i]["ttft_s"] for rd in rounds if rd.get("openlake", {}).get("ok")]
        L.append(f"| {n // 1024}K | {_mmm([rd['cold']['prompts'][i]['ttft_s'] for rd in rounds], '{:.3f}')} | "
                 f"{_mmm(loc, '{:.3f}')} |")
    return "\n".join(L + [""] + remote_table(res, rounds)) + "\n"


def report(path):
    res = json.load(open(path))
    med = statistics.median
    m = res.get("machine", {})
    cfg = res["model"]
    kvpt = res["kv_bytes_per_token"]
    rounds = [rd for rd in res["rounds"] if rd.get("cold", {}).get("ok")]
    warm = [s for s in res["systems"] if s in WARM and res["populate"].get(s, {}).get("ok")]
    inproc = [s for s in res["systems"] if s in PROBE and res["status"].get(s, {}).get("state") == "runs"]
    L = [f"Machine: {m.get('cpu', '?')}, {m.get('cores', '?')} cores, {m.get('mem_gib', '?')} GiB, "
         f"kernel {m.get('kernel', '?')}. vLLM {res.get('versions', {}).get('vllm', '?')} (CPU build), "
         f"in-process engine, bf16, block size {rounds[0]['cold'].get('block_size') if rounds else '?'}, "
         f"{res['kv_space_gib']} GiB KV cache, LD_PRELOAD {'tcmalloc + Intel OpenMP' if res.get('preload') else 'none'}, "
         f"KMP_BLOCKTIME={res.get('kmp_blocktime') if res.get('kmp_blocktime') is not None else 'unset (200 ms)'}. "
         f"Model `{res['model_dir']}/config.json`: Llama, {cfg['num_hidden_layers']} layers, hidden "
         f"{cfg['hidden_size']}, {cfg['num_attention_heads']} heads of {cfg.get('head_dim')} "
         f"({cfg['num_key_value_heads']} KV heads), MLP {cfg['intermediate_size']}, seeded random weights; "
         f"KV {kvpt // 1024} KiB per token. Servers (openlaked --threads 1, LMCache server) on CPU 0, "
         "each paused (SIGSTOP) while another system's engine runs, "
         f"{res['store_gib']} GiB of store each; engines on both cores. {len(rounds)} rounds, "
         f"each a fresh engine per system (the warm ones after a restart, populated once before the "
         f"rounds), median (min–max) of per-round values. Command: `bash bench/vllm/run_ttft.sh`.", ""]
    L += ["TTFT = wall time of `LLM.generate()` of one prompt, `max_tokens=1`. Goal (issue 4): warm "
          "TTFT ≤ 1/10 of recompute at 8K and beyond; copy time within 2× of a single-thread memcpy "
          "of the same bytes.", ""]
    L += ["| prompt | system | TTFT (s) | speed-up vs recompute | cached tokens | KV loaded (MiB) | "
          "load wait (ms) | copy (ms) | copy share of TTFT | memcpy same bytes (ms) | copy ÷ memcpy | "
          "first token = recompute |",
          "|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|"]
    goal = []
    for i, n in enumerate(res["lens"]):
        cold = [rd["cold"]["prompts"][i] for rd in rounds]
        L.append(f"| {n // 1024}K | {LABEL['cold']} | **{_mmm([c['ttft_s'] for c in cold], '{:.3f}')}** | 1 | "
                 f"{_mmm([c['num_cached_tokens'] for c in cold], '{:.0f}')} | | | | | | | |")
        for s in warm + inproc:
            ok = [rd for rd in rounds if rd.get(s, {}).get("ok")]
            if not ok:
                continue
            ps = [rd[s]["prompts"][i] for rd in ok]
            ps = [p.get("again", p) for p in ps]
            ttft = [p["ttft_s"] for p in ps]
            spd = [rd["cold"]["prompts"][i]["ttft_s"] / rd[s]["prompts"][i].get("again", rd[s]["prompts"][i])["ttft_s"]
                   for rd in ok]
            wait = [p["conn"]["copy_s"] for p in ps]
            copy = [p.get("openlake_load_s", p["conn"]["copy_s"]) for p in ps]
            share = [c / t for c, t in zip(copy, ttft)]
            mc = [rd["memcpy"].get(str(p["num_cached_tokens"] * kvpt), {}).get("s") for rd, p in zip(ok, ps)]
            ratio = [c / x for c, x in zip(copy, mc) if x]
            same = sum(1 for rd, p in zip(ok, ps) if p["token"] == rd["cold"]["prompts"][i]["token"])
            dlp = [abs(p["logprob"] - rd["cold"]["prompts"][i]["logprob"]) for rd, p in zip(ok, ps)
                   if p.get("logprob") is not None and rd["cold"]["prompts"][i].get("logprob") is not None]
            L.append(f"| {n // 1024}K | {LABEL.get(s, s)} | {_mmm(ttft, '{:.3f}')} | **{_mmm(spd, '{:.1f}')}×** | "
                     f"{_mmm([p['num_cached_tokens'] for p in ps], '{:.0f}')} | "
                     f"{med([p['num_cached_tokens'] for p in ps]) * kvpt / 2**20:.0f} | "
                     f"{_mmm([c * 1e3 for c in wait], '{:.1f}')} | {_mmm([c * 1e3 for c in copy], '{:.1f}')} | {_mmm([x * 100 for x in share], '{:.1f}')}% | "
                     f"{_mmm([x * 1e3 for x in mc if x], '{:.1f}')} | **{_mmm(ratio, '{:.2f}')}** | "
                     f"{same}/{len(ok)} (max Δlogprob {max(dlp) if dlp else float('nan'):.3f}) |")
            if s == "openlake" and n >= 8192:
                goal.append(f"{n // 1024}K: speed-up {med(spd):.1f}× ({'met' if med(spd) >= 10 else 'NOT met'}: ≥ 10), "
                            f"copy ÷ memcpy {med(ratio) if ratio else float('nan'):.2f} "
                            f"({'met' if ratio and med(ratio) <= 2 else 'NOT met'}: ≤ 2)")
    if goal:
        L += ["", "Goal check, OpenLake (medians): " + "; ".join(goal) + "."]
    L += ["", "Load wait: from the request's first `start_load_kv()` to the `get_finished()` reporting "
          "its load done (connectors that load asynchronously: OpenLake, LMCache), or the time inside "
          "`start_load_kv()` + `wait_for_layer_load()` (synchronous ones: ExampleConnector), by wrapping "
          "the connector's hooks in the harness. Copy: OpenLake's own load time (`vllm:openlake_load_ms`: the checked copy out of the slab "
          "into vLLM's KV blocks, measured inside its I/O thread); other connectors: the load wait. "
          "memcpy: numpy `copyto`, one thread, pre-faulted buffers, caches flushed before each copy, "
          "same run; copy ÷ memcpy is per round.", ""]
    # Where the warm TTFT goes
    L += ["Where a warm TTFT goes (ms, medians): from `generate()` to the request's first "
          "`start_load_kv()` (scheduling, lookup), the load wait, and from the load's end to "
          "`generate()` returning (computing the tokens not loaded — vLLM computes at least the "
          "prompt's last token; block-granular connectors the whole last block — and sampling).", "",
          "| prompt | system | before the load | load wait | after the load | lookup (scheduler) |",
          "|---:|---|---:|---:|---:|---:|"]
    for i, n in enumerate(res["lens"]):
        for s in warm + inproc:
            ps = [rd[s]["prompts"][i] for rd in rounds if rd.get(s, {}).get("ok")]
            ps = [p.get("again", p)["conn"] for p in ps]
            if not ps or ps[0].get("before_load_s") is None:
                continue
            f = lambda k: f"{med([c[k] for c in ps if c.get(k) is not None]) * 1e3:.1f}"
            L.append(f"| {n // 1024}K | {LABEL.get(s, s)} | {f('before_load_s')} | {f('copy_s')} | "
                     f"{f('after_load_s')} | {f('lookup_s')} |")
    L.append("")
    # First prefill through each connector (saving) and engine start-up
    L += ["| system | first prefill with the connector, per prompt (s) | engine start-up (s) | "
          "server CPU per warm engine (s) |", "|---|---|---:|---:|"]
    for s in ["cold"] + warm + inproc:
        if s == "cold":
            pre = "–"
            inits = [rd["cold"]["init_s"] for rd in rounds]
            cpu = "–"
        else:
            po = res["populate"].get(s, {})
            pre = ", ".join(f"{p['len'] // 1024}K {p['ttft_s']:.2f}" for p in po.get("prompts", [])) or "–"
            ok = [rd[s] for rd in rounds if rd.get(s, {}).get("ok")]
            inits = [o["init_s"] for o in ok]
            cs = [sum(o.get("server_cpu_s", {}).values()) for o in ok if o.get("server_cpu_s")]
            cpu = _mmm(cs, "{:.2f}")
        L.append(f"| {LABEL.get(s, s)} | {pre} | {_mmm(inits, '{:.1f}')} | {cpu} |")
    L += ["", "Peers on this CPU build:", "", "| system | status | detail |", "|---|---|---|"]
    for s in res["systems"]:
        st = res["status"].get(s, {"state": "?", "detail": ""})
        L.append(f"| {LABEL.get(s, s)} | {st['state']} | {st['detail'].replace('|', '/')} |")
    return "\n".join(L) + "\n"


# ---------------------------------------------------------------------------


def main(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = p.add_subparsers(dest="cmd", required=True)
    e = sub.add_parser("engine")
    e.add_argument("spec")
    e.add_argument("out")
    r = sub.add_parser("run")
    r.add_argument("--lens", default="2048,8192,32768")
    r.add_argument("--rounds", type=int, default=5)
    r.add_argument("--systems", default="cold,openlake,openlake-remote,lmcache,vllm-example,vllm-native,"
                                        "vllm-simple,lmcache-inproc")
    r.add_argument("--model", default=MODEL)
    r.add_argument("--dummy-weights", action="store_true", help="vLLM dummy weights (no correctness check)")
    r.add_argument("--dtype", default="bfloat16")
    r.add_argument("--seed", default="1")
    r.add_argument("--kv-space-gib", type=int, default=2)
    r.add_argument("--store-gib", type=int, default=2)
    r.add_argument("--python", default=sys.executable)
    r.add_argument("--lmcache-python", default="")
    r.add_argument("--lmcache-port", type=int, default=5555)
    r.add_argument("--lmcache-pid", type=int, default=0)
    r.add_argument("--openlake-addr", default="127.0.0.1:9400")
    r.add_argument("--openlake-socket", default="")
    r.add_argument("--openlake-token-file", default="")
    r.add_argument("--openlake-pid", type=int, default=0)
    r.add_argument("--remote-ns-a", default="", help="openlake-remote: node A's network namespace")
    r.add_argument("--remote-ns-b", default="", help="openlake-remote: node B's network namespace")
    r.add_argument("--remote-ip-a", default="127.0.0.1")
    r.add_argument("--remote-ip-b", default="127.0.0.1")
    r.add_argument("--remote-etcd-ip", default="127.0.0.1", help="etcd's address (root namespace)")
    r.add_argument("--remote-kv-timeout-ms", type=int, default=300,
                   help="the nodes' cluster.kv_timeout_ms (the daemon's default): how long node "
                        "A may take to ask B about a lookup's keys, or to fetch a load part's")
    r.add_argument("--example-dir", default="/dev/shm/openlake-ttft-example")
    r.add_argument("--preload", default="", help="LD_PRELOAD for engines (colon-separated)")
    r.add_argument("--versions", default="", help="JSON object of package versions to record")
    r.add_argument("--engine-timeout", type=int, default=1800)
    r.add_argument("--work", required=True)
    r.add_argument("--out", required=True)
    q = sub.add_parser("report")
    q.add_argument("result")
    q.add_argument("--doc", default="")
    q.add_argument("--remote-only", action="store_true",
                   help="with --doc: rewrite the vllm-ttft-remote section only")
    a = p.parse_args(argv[1:])
    if a.cmd == "engine":
        return engine(a.spec, a.out)
    if a.cmd == "run":
        Runner(a).run()
        print(f"raw results: {a.out}", file=sys.stderr)
        return 0
    text, rtext = report(a.result), report_remote(a.result)
    print(text)
    if rtext:
        print(rtext)
    if a.doc:
        sys.path.insert(0, os.path.join(ROOT, "bench"))
        from docsection import replace_section

        if not a.remote_only:
            replace_section(a.doc, "vllm-ttft", text,
                            heading="## vLLM time to first token: recompute vs KV from OpenLake (CPU)")
        if rtext:
            replace_section(a.doc, "vllm-ttft-remote", rtext,
                            heading="### The prefix on another node (issue 38)")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
