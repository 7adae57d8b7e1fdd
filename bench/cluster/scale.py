#!/usr/bin/env python3
"""The cluster's KV pool: each node's CPU seconds per GB moved with 1, 2 and
4 nodes (each in its own network namespace), over each node RPC transport.

Run by bench/cluster/run_scale.sh inside namespace 1 (NS_NAMES, NS_IPS: the four
namespaces and their addresses, space-separated). Starts etcd on namespace
1's address, then per transport (tcp, ucx: UCX_TLS=tcp unless set) and
node count n (1, 2, 4) a fresh cluster of its own (bench-<transport><n>):
node i in namespace i, `openlaked --threads 1`, servers pinned to CPU 0
and this client on CPU 1 as bench/cluster/pool.py has them. The same load
through each:
  put   MIB MiB of fresh values (VALUE bytes each, batches of BATCH keys),
        batch b put through node b mod n's Unix socket (its shared slab);
        a key homed elsewhere (the placement rule) is sent home over the
        node RPC; timed until every such push was served or given up
        (the nodes' openlake_kvpool_served_puts_total, push drops and
        failures), checked against the count placement predicts;
  get   batch b read through node (b + 1) mod n: with 2 and 4 nodes never
        the node that stored it, so a key is local only on its home and
        otherwise fetched from there (openlake_kvpool_fetched_keys_total
        checked against placement); with 1 node all local.
Each node's CPU time (utime + stime of its process, /proc/PID/stat) is
read before and after each phase. Reported per configuration and phase:
each node's CPU seconds per GB the clients moved through that node, their
sum per GB moved in all, and that sum's ratio to the 1-node figure of the
same transport. Every value is stamped with a unique id; the last batch of
every round is read back byte for byte.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import time
import types

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import pool  # noqa: E402  (bench/cluster/pool.py: Cluster, metrics, kpm, the paths)
from pool import ROOT, kpm, metrics, peers, place  # noqa: E402
import numpy as np  # noqa: E402

NODES = (1, 2, 4)
GOAL = 1.25           # "flat": the summed CPU per GB at most this times the 1-node figure


def homes(keys, n):
    """Each key's home among n equal members (same slab, no disk tier)."""
    members = [(i, 1) for i in range(1, n + 1)]
    return [place.homes(members, pool.NS.encode(), k)[0] for k in keys]


def settle(nodes, m0, want, t0):
    """Waits until the nodes served (or their senders gave up on) want
    pushes in all since m0 (their metrics before); returns served, given up."""
    while True:
        ms = [metrics(n["url"]) for n in nodes]
        served = sum(kpm(m, "served_puts_total") - kpm(b, "served_puts_total") for m, b in zip(ms, m0))
        gave_up = sum(kpm(m, k) - kpm(b, k) for m, b in zip(ms, m0)
                      for k in ("push_drops_total", "push_failures_total"))
        if served + gave_up >= want:
            return served, gave_up
        if time.perf_counter() - t0 > 120:
            raise RuntimeError(f"{served} of {want} pushes served in 120 s ({gave_up} given up)")
        time.sleep(0.005)


def cpu_each(pids):
    return [peers.proc_cpu([p]) for p in pids]


def one_round(cl, clients, bufs, v, batch, nbatch, tag):
    """One put pass and one get pass of nbatch fresh batches through the
    cluster's nodes; the two rows."""
    nodes, n = cl.nodes, len(cl.nodes)
    pids = [x["pid"] for x in nodes]
    keys = [[f"{tag}/{b}/{i}".encode() for i in range(batch)] for b in range(nbatch)]
    ids = [np.arange(batch, dtype=np.uint64) + np.uint64((b + 1) << 20) for b in range(nbatch)]
    home = [homes(k, n) for k in keys]
    writer = [b % n + 1 for b in range(nbatch)]
    reader = [(b + 1) % n + 1 for b in range(nbatch)]
    per_node_bytes = [sum(batch * v for b in range(nbatch) if writer[b] == i) for i in range(1, n + 1)]
    rows = []
    for op in ("put", "get"):
        who = writer if op == "put" else reader
        want = sum(h != who[b] for b in range(nbatch) for h in home[b])   # across the node RPC
        m0 = [metrics(x["url"]) for x in nodes]
        c0 = cpu_each(pids)
        t0 = time.perf_counter()
        sts = []
        for b in range(nbatch):
            if op == "put":
                bufs.stamp(v, ids[b])
                clients[who[b] - 1].put(keys[b])
            else:
                c = clients[who[b] - 1]
                sts.append(c.c.get(keys[b], c.dst))
        gave_up = 0
        if op == "put":
            _, gave_up = settle(nodes, m0, want, t0)
        wall = time.perf_counter() - t0
        c1 = cpu_each(pids)
        ms = [metrics(x["url"]) for x in nodes]
        if op == "get":
            # a key whose fetch failed is a miss (given up: counted, its
            # bytes still in the load's GB as asked for)
            if any(x >= 0 and x != v for st in sts for x in st):
                raise RuntimeError(f"{n} nodes: get statuses {sorted({x for st in sts for x in st})}")
            # a miss of a key homed on its reader is a push the put gave up
            miss_far = sum(st[i] != v for b, st in enumerate(sts) for i in range(batch) if home[b][i] != who[b])
            miss_home = sum(st[i] != v for b, st in enumerate(sts) for i in range(batch) if home[b][i] == who[b])
            gave_up = miss_far + miss_home
            got = sum(kpm(m, "fetched_keys_total") - kpm(b, "fetched_keys_total") for m, b in zip(ms, m0))
            if got + miss_far != want or miss_home > rows[0]["gave_up"]:
                raise RuntimeError(f"{n} nodes: {got} keys fetched and {miss_far} missed, placement says {want}; "
                                   f"{miss_home} missed at their home, {rows[0]['gave_up']} pushes given up")
            last, exp = sts[-1], bufs.expected(v, ids[nbatch - 1])
            if any(last[i] == v and not np.array_equal(bufs.dst[i * v:(i + 1) * v], exp[i * v:(i + 1) * v])
                   for i in range(batch)):
                raise RuntimeError(f"{n} nodes: the last batch read differs from the one stored")
        cpu = [a - b for a, b in zip(c1, c0)]
        total = nbatch * batch * v
        rows.append({"transport": cl.transport, "nodes": n, "op": op, "bytes": total, "s": wall,
                     "gbs": total / 1e9 / wall, "crossed_keys": want, "keys": nbatch * batch,
                     "gave_up": gave_up, "cpu_s": cpu,
                     "cpu_s_per_gb_node": [c / (b / 1e9) for c, b in zip(cpu, per_node_bytes)],
                     "cpu_s_per_gb_sum": sum(cpu) / (total / 1e9)})
    return rows


def med(xs):
    return statistics.median(xs)


def report(run, out_json):
    m, cfg, rows = run["machine"], run["config"], run["rows"]
    L = [f"Machine: {m['cpu']}, {m['cores']} cores, kernel {m['kernel']}, {m['mem_gib']} GiB, 1-minute load "
         f"average {m['loadavg_1min_start_end'][0]:.1f} at the start and {m['loadavg_1min_start_end'][1]:.1f} at "
         f"the end (a shared machine). Raw data: `{os.path.relpath(out_json, ROOT)}`. "
         f"{cfg['mib']} MiB of {cfg['value_bytes'] // 1024} KiB values in batches of {cfg['batch']} per phase, "
         f"{cfg['rounds']} rounds per configuration (medians, fresh keys each), servers on CPU 0 and the client on "
         f"CPU 1{'' if cfg['pinned'] else ' (NOT pinned: fewer than 2 CPUs)'}"
         + (f"; UCX with `{cfg['ucx_env']}`" if "ucx" in cfg["transports"] else "") + ".", "",
         "| node RPC | nodes | op | values across the node RPC | given up (all rounds) | GB/s "
         f"| each node's CPU s per GB through it | all nodes' CPU s per GB | ÷ 1 node (goal ≤ {GOAL}, flat) |",
         "|---|---:|---|---:|---:|---:|---|---:|---|"]
    summary = []
    for t in cfg["transports"]:
        for op in ("put", "get"):
            base = None
            for n in cfg["nodes"]:
                sel = [r for r in rows if r["transport"] == t and r["op"] == op and r["nodes"] == n]
                s = med([r["cpu_s_per_gb_sum"] for r in sel])
                each = [med([r["cpu_s_per_gb_node"][i] for r in sel]) for i in range(n)]
                if n == 1:      # under 2 clock ticks in all: /proc cannot tell it from nothing,
                    floor = med([sum(r["cpu_s"]) for r in sel]) < 2 / peers.CLK   # so 2 ticks bound it
                    base = max(s, 2 / peers.CLK / (sel[0]["bytes"] / 1e9)) if floor else s
                ratio = s / base
                crossed = sel[0]["crossed_keys"] / sel[0]["keys"]
                if n == 1:
                    cell = f"1.00× (under 2 clock ticks: < {base:.2f} s/GB)" if floor else "1.00×"
                else:
                    cell = (f"{'>' if floor else ''}{ratio:.2f}×, {'met' if ratio <= GOAL else 'NOT met'}")
                L.append(f"| {t.upper()} | {n} | {op} | {crossed:.0%} | {sum(r['gave_up'] for r in sel)} | "
                         f"{med([r['gbs'] for r in sel]):.2f} | "
                         f"{' / '.join(f'{x:.2f}' for x in each)} | {s:.2f} | {cell} |")
                summary.append({"transport": t, "op": op, "nodes": n, "cpu_s_per_gb_sum": s,
                                "cpu_s_per_gb_node": each, "ratio_to_1": ratio})
    return "\n".join(L) + "\n", summary


EXPLAIN = """\
Command: `make bench-cluster` (after the two-namespace run above), or `bash bench/cluster/run_scale.sh`
(knobs: `ROUNDS=3 MIB=256 VALUE=1048576 BATCH=32 TRANSPORTS=tcp,ucx`; root and etcd needed). It makes four
network namespaces on a bridge and runs `bench/cluster/scale.py` in the first: per node RPC transport and
node count (1, 2, 4) a fresh cluster, node i in namespace i (`openlaked --threads 1`, measured once its
slab is populated and a second more); **put**: batch b
through node b mod n's Unix socket, keys homed elsewhere sent home over the node RPC, timed until every push
was served; **get**: batch b through node (b + 1) mod n, so with 2 and 4 nodes a value is local only on its
home and fetched from there otherwise (with 1 node everything is local: no node RPC at all). The crossed
counts are checked against the placement rule; a push dropped or failed and a get whose fetch failed (a
miss) are counted as given up, their bytes still in the GB moved. CPU: each node process's utime + stime (/proc/PID/stat)
over the phase; "each node's" is per GB the clients moved through that node (a quarter of the load with
4 nodes), "all nodes'" the sum per GB moved in all.

"""


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rounds", type=int, default=int(os.environ.get("ROUNDS", 3)))
    ap.add_argument("--mib", type=int, default=int(os.environ.get("MIB", 256)))
    ap.add_argument("--value-bytes", type=int, default=int(os.environ.get("VALUE", 1 << 20)))
    ap.add_argument("--batch", type=int, default=int(os.environ.get("BATCH", 32)))
    ap.add_argument("--transports", default=os.environ.get("TRANSPORTS"),
                    help="the node RPC's transports (default: tcp,ucx; tcp alone in a build without UCX)")
    ap.add_argument("--doc", default=os.path.join(ROOT, "docs", "benchmarks.md"))
    ap.add_argument("--no-doc", action="store_true", help="do not rewrite docs/benchmarks.md")
    ap.add_argument("--no-pin", dest="pin", action="store_false")
    args = ap.parse_args()
    nss, ips = os.environ.get("NS_NAMES", "").split(), os.environ.get("NS_IPS", "").split()
    if len(nss) < max(NODES) or len(ips) != len(nss):
        ap.error("run through bench/cluster/run_scale.sh (NS_NAMES, NS_IPS: four namespaces and their addresses)")
    if (os.cpu_count() or 1) < 2:
        args.pin = False
    v, batch = args.value_bytes, args.batch
    if v < 8 or v % 8 or batch < 1 or args.rounds < 1 or args.mib < 1:
        ap.error("--value-bytes: a multiple of 8; --batch, --rounds, --mib: at least 1")
    nbatch = -(-(args.mib << 20) // (batch * v))
    nbatch += -nbatch % max(NODES)           # every node gets as many batches
    transports = pool.transports_of(ap, args.transports)
    place.check()
    cap_gib = max(1, -(-(2 * nbatch * batch * v * (args.rounds + 1)) // (1 << 30)))
    load0 = os.getloadavg()[0]
    machine = json.loads(subprocess.run([sys.executable, os.path.join(ROOT, "bench", "http", "machine.py")],
                                        capture_output=True, text=True, check=True, cwd=ROOT).stdout)
    srv = peers.Servers(types.SimpleNamespace(pin=args.pin, capacity_gib=cap_gib))
    ok, rows, clients = False, [], []
    try:
        url = pool.start_etcd(srv, ips[0])
        if args.pin:
            os.sched_setaffinity(0, {1})
        bufs = peers.Buffers(batch, v)
        port = 9200
        for t in transports:
            for n in NODES:
                port += 1                      # a fresh rpc_addr for each cluster
                cl = pool.Cluster(srv, list(zip(nss, ips))[:n], url, cap_gib, [], t, tag=str(n), rpc_port=port)
                # every node's members and peers are up and its slab populated;
                # the cores' placement snapshot follows the view a moment
                # later (a put before it was kept home, not pushed: the count
                # placement predicts was never reached), as the cluster tests wait
                time.sleep(1)
                try:
                    clients = [peers.OpenLake(types.SimpleNamespace(ol={"unix": x["sock"], "token_file": cl.token}),
                                              "unix", v, bufs, batch) for x in cl.nodes]
                    for r in range(args.rounds + 1):        # round 0: a warm-up
                        got = one_round(cl, clients, bufs, v, batch, nbatch, f"{t}{n}/r{r}")
                        for row in got:
                            print(f"{t} {n} node(s) {'warm-up' if r == 0 else f'round {r}'}: {row['op']} "
                                  f"{row['gbs']:.2f} GB/s, {row['crossed_keys']}/{row['keys']} across ({row['gave_up']} given up), "
                                  f"CPU s/GB "
                                  f"{row['cpu_s_per_gb_sum']:.2f} (" +
                                  " ".join(f"{x:.2f}" for x in row["cpu_s_per_gb_node"]) + ")", flush=True)
                            if r:
                                rows.append(dict(row, round=r))
                finally:
                    for c in clients:
                        c.close()
                    clients = []
                    cl.stop()
        ok = True
    finally:
        srv.stop()
        if ok:
            subprocess.run(["rm", "-rf", srv.dir])
        else:
            print(f"logs kept in {srv.dir}", file=sys.stderr)
    machine["loadavg_1min_start_end"] = [load0, os.getloadavg()[0]]
    run = {"machine": machine, "rows": rows,
           "config": {"transports": transports, "nodes": list(NODES), "mib": nbatch * batch * v >> 20,
                      "value_bytes": v, "batch": batch, "rounds": args.rounds, "pinned": args.pin,
                      "capacity_gib": cap_gib, "ucx_env": pool.ucx_env()}}
    from docsection import write_results
    write_results(ROOT, "cluster-scale", run, report, args.doc, EXPLAIN,
                  "## Cluster KV pool: CPU per GB moved with 1, 2 and 4 nodes", write_doc=not args.no_doc)


if __name__ == "__main__":
    main()
