"""Run one vLLM (CPU) engine over a list of token prompts and write the results.

    .venv/bin/python tests/vllm/run_engine.py spec.json out.json

One process, one engine: tests start it as a subprocess, once per "node", so
nothing (vLLM's own prefix cache, a connector's state) survives from one run
to the next unless it went through the connector's storage.

spec.json (only "prompts" is required):
  model                dir with config.json (tests/vllm/tiny-llama) and, if
                       there, model.safetensors (tests/vllm/make_model.py)
  weights              "file" (default): the model dir's safetensors or, when
                       it has none, make_model.py's seeded random weights for
                       its config.json, written once to
                       $TMPDIR/openlake-vllm-<dir name>-<hash>/;
                       "dummy": vLLM's load_format="dummy" (weights in
                       +-1e-3: each output token depends on the previous
                       token alone, so KV contents never change the output)
  dtype                "float32"
  max_model_len        1024
  block_size           null: vLLM's default (128 on CPU); multiples of 32
  prompts              [{"prompt_token_ids": [...], "cache_salt": "s"?}, ...]
  max_tokens           8
  logprobs             0: logprob of the sampled token only; k > 0 also
                       returns the top k per position ("top_logprobs")
  sequential           true: one generate() per prompt, in order;
                       false: all prompts in one generate()
  kv_transfer_config   null, or a dict passed as KVTransferConfig(**d)
  enable_prefix_caching  null: vLLM's default (on)
  seed                 0
  env                  {} environment overrides, applied before vLLM loads
  sys_path             [] dirs put first on sys.path (a connector module's)
  llm_kwargs           {} anything else for vllm.LLM(...)
  pause_after          null, or {"index": i, "dir": d, "timeout_s": 600}:
                       after the generate() that ran prompt i, create
                       d/paused-<i> and wait until d/go-<i> exists
  reset_after          [] prompt indexes after which the engine calls
                       llm.reset_prefix_cache(reset_connector=True), again
                       every 0.1 s for up to 10 s while it answers False
                       (blocks still held, e.g. by a connector's async save:
                       only an engine core in its own process keeps stepping
                       meanwhile); the last answers land in out.json "resets"

out.json:
  vllm_version, model (the dir loaded), block_size (the one in effect),
  init_s, total_s (the first generate() also carries ~2 s of warm-up),
  calls:   [{"prompts": [i, ...], "wall_s": s, "counters": {name: delta}}]
           counters are the engine's prometheus counters over that call:
           vllm:prefix_cache_{queries,hits} (vLLM's own, local prefix cache),
           vllm:external_prefix_cache_{queries,hits} (the KV connector's),
           vllm:prompt_tokens, vllm:generation_tokens, and OpenLakeConnector's
           vllm:openlake_{hit_tokens,loaded_blocks,load_failed_blocks,saved_blocks,
           save_dropped_blocks,fenced_blocks,fence_waits}
  results: [{"index", "prompt_len", "token_ids", "logprobs", ("top_logprobs"),
             "num_cached_tokens", "finish_reason", "wall_s"}]  in prompt order
  num_cached_tokens is RequestOutput.num_cached_tokens: prompt tokens not
  computed, local prefix-cache hits plus tokens the connector loaded.

Sampling is greedy (temperature 0, ignore_eos), so exactly max_tokens tokens
come back and the same spec gives the same tokens in any process. Any error:
the traceback on stderr, exit status 1, out.json not written.
"""

import atexit
import json
import os
import shutil
import sys
import tempfile
import time
import traceback

HERE = os.path.dirname(os.path.abspath(__file__))

DEFAULTS = {
    "model": os.path.join(HERE, "tiny-llama"),
    "weights": "file",
    "dtype": "float32",
    "max_model_len": 1024,
    "block_size": None,
    "prompts": None,
    "max_tokens": 8,
    "logprobs": 0,
    "sequential": True,
    "kv_transfer_config": None,
    "enable_prefix_caching": None,
    "seed": 0,
    "env": {},
    "sys_path": [],
    "llm_kwargs": {},
    "pause_after": None,
    "reset_after": [],
}

# Offline, in-process engine (the scheduler and the worker, so both halves of
# a connector, live in this process; env {"VLLM_ENABLE_V1_MULTIPROCESSING":
# "1"} puts the engine core in a child process as `vllm serve` does), 1 GiB KV.
ENV = {
    "HF_HUB_OFFLINE": "1",
    "TRANSFORMERS_OFFLINE": "1",
    "VLLM_NO_USAGE_STATS": "1",
    "DO_NOT_TRACK": "1",
    "VLLM_CPU_KVCACHE_SPACE": "1",
    "VLLM_ENABLE_V1_MULTIPROCESSING": "0",
    "TOKENIZERS_PARALLELISM": "false",
}

COUNTERS = (
    "vllm:prefix_cache_queries",
    "vllm:prefix_cache_hits",
    "vllm:external_prefix_cache_queries",
    "vllm:external_prefix_cache_hits",
    "vllm:prompt_tokens",
    "vllm:generation_tokens",
    # OpenLakeConnector's own (0 without it)
    "vllm:openlake_hit_tokens",
    "vllm:openlake_loaded_blocks",
    "vllm:openlake_load_failed_blocks",
    "vllm:openlake_saved_blocks",
    "vllm:openlake_save_dropped_blocks",
    "vllm:openlake_fenced_blocks",
    "vllm:openlake_fence_waits",
)


def load_spec(path):
    with open(path) as f:
        spec = json.load(f)
    if not isinstance(spec, dict):
        raise ValueError(f"{path}: want a JSON object")
    unknown = sorted(set(spec) - set(DEFAULTS))
    if unknown:
        raise ValueError(f"{path}: unknown keys {unknown}")
    spec = {**DEFAULTS, **spec}
    prompts = spec["prompts"]
    if not isinstance(prompts, list) or not prompts:
        raise ValueError(f"{path}: 'prompts' must be a non-empty list")
    for i, p in enumerate(prompts):
        ids = p.get("prompt_token_ids") if isinstance(p, dict) else None
        if not isinstance(ids, list) or not ids or not all(type(t) is int for t in ids):
            raise ValueError(f"{path}: prompts[{i}].prompt_token_ids must be a non-empty list of ints")
        extra = set(p) - {"prompt_token_ids", "cache_salt"}
        if extra:
            raise ValueError(f"{path}: prompts[{i}]: unknown keys {sorted(extra)}")
    pa = spec["pause_after"]
    if pa is not None and (not isinstance(pa, dict) or type(pa.get("index")) is not int
                           or not isinstance(pa.get("dir"), str)
                           or set(pa) - {"index", "dir", "timeout_s"}):
        raise ValueError(f"{path}: pause_after must be {{\"index\": int, \"dir\": str}}")
    return spec


def model_dir(path):
    """path itself when it holds *.safetensors (tests/vllm/make_model.py
    output); else a checkpoint that make_model.py writes once from
    path/config.json into $TMPDIR and that later runs reuse."""
    import glob
    import hashlib
    import shutil
    import tempfile

    if glob.glob(os.path.join(path, "*.safetensors")):
        return path
    make = os.path.join(HERE, "make_model.py")
    h = hashlib.sha256()
    for f in (os.path.join(path, "config.json"), make):
        with open(f, "rb") as fh:
            h.update(fh.read())
    name = os.path.basename(os.path.normpath(path))
    out = os.path.join(tempfile.gettempdir(), f"openlake-vllm-{name}-{h.hexdigest()[:16]}")
    if os.path.exists(os.path.join(out, "model.safetensors")):
        return out
    sys.path.insert(0, HERE)
    import make_model

    tmp = tempfile.mkdtemp(prefix=".openlake-vllm-", dir=tempfile.gettempdir())
    try:
        os.chmod(tmp, 0o755)
        make_model.main(tmp, os.path.join(path, "config.json"))
        try:
            os.rename(tmp, out)
        except OSError:  # made meanwhile by another run
            if not os.path.exists(os.path.join(out, "model.safetensors")):
                raise
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return out


def pause(spec, i):
    """pause_after {"index": i, "dir": d}: once prompt i is done, create
    d/paused-<i>, then wait for d/go-<i> (made by the test)."""
    pa = spec["pause_after"]
    if pa is None or pa["index"] != i:
        return
    os.makedirs(pa["dir"], exist_ok=True)
    open(os.path.join(pa["dir"], f"paused-{i}"), "w").close()
    go = os.path.join(pa["dir"], f"go-{i}")
    deadline = time.monotonic() + float(pa.get("timeout_s", 600))
    while not os.path.exists(go):
        if time.monotonic() > deadline:
            raise TimeoutError(f"pause_after: no {go}")
        time.sleep(0.05)


def counters(llm):
    """The engine's counters named in COUNTERS, summed over their labels."""
    from vllm.v1.metrics.reader import Counter

    out = dict.fromkeys(COUNTERS, 0)
    for m in llm.get_metrics():
        if isinstance(m, Counter) and m.name in out:
            out[m.name] += m.value
    return out


def run(spec):
    t0 = time.perf_counter()
    os.environ.update(ENV)
    os.environ.update({k: str(v) for k, v in spec["env"].items()})
    # vLLM's ZMQ ipc sockets go to a private dir removed on exit, not /tmp.
    rpc = tempfile.mkdtemp(prefix="olvrpc")
    atexit.register(shutil.rmtree, rpc, True)
    os.environ.setdefault("VLLM_RPC_BASE_PATH", rpc)
    sys.path[:0] = [os.path.abspath(p) for p in spec["sys_path"]]

    import vllm
    from vllm import LLM, SamplingParams
    from vllm.config import KVTransferConfig

    model = os.path.abspath(spec["model"])
    if spec["weights"] == "file":
        model = model_dir(model)
        load_format = "safetensors"
    elif spec["weights"] == "dummy":
        load_format = "dummy"
    else:
        raise ValueError(f"weights: want 'file' or 'dummy', not {spec['weights']!r}")

    kw = dict(
        model=model,
        load_format=load_format,
        skip_tokenizer_init=True,
        generation_config="vllm",  # no eos/sampling defaults from the model dir
        dtype=spec["dtype"],
        max_model_len=spec["max_model_len"],
        enforce_eager=True,
        seed=spec["seed"],
        disable_log_stats=False,  # for get_metrics()
    )
    if spec["block_size"] is not None:
        kw["block_size"] = spec["block_size"]
    if spec["enable_prefix_caching"] is not None:
        kw["enable_prefix_caching"] = spec["enable_prefix_caching"]
    if spec["kv_transfer_config"] is not None:
        kw["kv_transfer_config"] = KVTransferConfig(**spec["kv_transfer_config"])
    kw.update(spec["llm_kwargs"])

    llm = LLM(**kw)
    init_s = time.perf_counter() - t0

    sp = SamplingParams(
        max_tokens=spec["max_tokens"],
        temperature=0.0,
        ignore_eos=True,
        logprobs=spec["logprobs"],
        seed=spec["seed"],
    )
    prompts = []
    for p in spec["prompts"]:
        q = {"prompt_token_ids": list(p["prompt_token_ids"])}
        if p.get("cache_salt") is not None:
            q["cache_salt"] = p["cache_salt"]
        prompts.append(q)

    groups = [[i] for i in range(len(prompts))] if spec["sequential"] else [list(range(len(prompts)))]
    results = [None] * len(prompts)
    calls = []
    resets = []
    for group in groups:
        before = counters(llm)
        t = time.perf_counter()
        outs = llm.generate([prompts[i] for i in group], sp, use_tqdm=False)
        wall = time.perf_counter() - t
        after = counters(llm)
        calls.append({
            "prompts": group,
            "wall_s": round(wall, 6),
            "counters": {k: after[k] - before[k] for k in COUNTERS},
        })
        if len(outs) != len(group):
            raise RuntimeError(f"generate returned {len(outs)} outputs for {len(group)} prompts")
        for i, o in zip(group, outs):
            if list(o.prompt_token_ids) != prompts[i]["prompt_token_ids"]:
                raise RuntimeError(f"output for prompt {i} has other prompt tokens")
            c = o.outputs[0]
            ids = list(c.token_ids)
            lps, tops = [], []
            for tok, pos in zip(ids, c.logprobs or []):
                lps.append(float(pos[tok].logprob))
                tops.append({str(t): float(lp.logprob) for t, lp in pos.items()})
            if len(lps) != len(ids):
                raise RuntimeError(f"prompt {i}: {len(lps)} logprobs for {len(ids)} tokens")
            r = {
                "index": i,
                "prompt_len": len(o.prompt_token_ids),
                "token_ids": ids,
                "logprobs": lps,
                "num_cached_tokens": o.num_cached_tokens,
                "finish_reason": c.finish_reason,
                "wall_s": round(wall, 6),
            }
            if spec["logprobs"]:
                r["top_logprobs"] = tops
            results[i] = r
        for i in group:
            pause(spec, i)
            if i in spec["reset_after"]:
                deadline = time.monotonic() + 10
                while not (ok := llm.reset_prefix_cache(reset_connector=True)) \
                        and time.monotonic() < deadline:
                    time.sleep(0.1)
                resets.append(ok)

    return {
        "vllm_version": vllm.__version__,
        "model": model,
        "block_size": llm.llm_engine.vllm_config.cache_config.block_size,
        "init_s": round(init_s, 3),
        "total_s": round(time.perf_counter() - t0, 3),
        "calls": calls,
        "resets": resets,
        "results": results,
    }


def main(argv):
    if len(argv) != 3:
        print(f"usage: {argv[0]} spec.json out.json", file=sys.stderr)
        return 2
    try:
        out = run(load_spec(argv[1]))
        tmp = argv[2] + ".tmp"
        with open(tmp, "w") as f:
            json.dump(out, f, indent=1)
        os.replace(tmp, argv[2])
    except BaseException:
        traceback.print_exc()
        sys.stderr.flush()
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
