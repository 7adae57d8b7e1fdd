"""End-to-end listing through the S3 API (issue 5): a bucket of N objects
(default 1,000,000) in a real openlaked, listed with signed ListObjectsV2
requests over HTTP, as a client sees it.

The objects are made by bench/store/gen_objects (one real PUT as the
template, then N metadata files written where the engine puts them), so
the daemon's start rebuilds the bucket's index from N metadata files, as
after a crash; then a clean stop checkpoints it and the next start loads
it. Measured: the rebuild, the first page of 1000 keys (and of 1000
CommonPrefixes with delimiter "/"), a full listing in pages of 1000
(continuation tokens, every key counted), the clean stop, the load.
Server pinned to CPU 0, this client to CPU 1.

    python3 bench/store/list_e2e.py [N]      (make bench-store runs it)
"""
import http.client
import json
import os
import re
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import time
import urllib.parse

from botocore.auth import SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "bench"))
sys.path.insert(0, os.path.join(ROOT, "bench", "http"))
from docsection import replace_section  # noqa: E402

AK, SK = "OLBENCHACCESSKEY0001", "olBenchSecretKey/0123456789abcdefghijklm"
N = int(sys.argv[1]) if len(sys.argv) > 1 else 1_000_000
TMP = os.path.join(ROOT, "build", "bench", "list-e2e")
DRIVE = os.path.join(TMP, "drive0")


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    p = s.getsockname()[1]
    s.close()
    return p


class Daemon:
    def __init__(self, port):
        self.port = port
        self.proc = None

    def start(self):
        env = dict(os.environ, OPENLAKE_ACCESS_KEY=AK, OPENLAKE_SECRET_KEY=SK)
        self.log = open(os.path.join(TMP, "daemon.log"), "a")
        t0 = time.perf_counter()
        self.proc = subprocess.Popen(
            ["taskset", "-c", "0", os.path.join(ROOT, "build", "openlaked"), "--mode", "s3",
             "--s3-addr", f"127.0.0.1:{self.port}", "--data-dirs", DRIVE, "--threads", "1"],
            env=env, stdout=subprocess.DEVNULL, stderr=self.log)
        while True:
            try:
                c = http.client.HTTPConnection("127.0.0.1", self.port, timeout=1)
                c.request("GET", "/_openlake/health/ready")
                if c.getresponse().status == 200:
                    return time.perf_counter() - t0
            except OSError:
                pass
            if self.proc.poll() is not None:
                raise SystemExit("openlaked exited: see " + self.log.name)
            time.sleep(0.01)

    def stop(self):
        t0 = time.perf_counter()
        self.proc.send_signal(signal.SIGTERM)
        self.proc.wait(timeout=600)
        self.log.close()
        return time.perf_counter() - t0


class Client:
    """Keep-alive HTTP connection, SigV4 per request (botocore's signer)."""

    def __init__(self, port):
        self.port = port
        self.conn = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
        self.auth = SigV4Auth(Credentials(AK, SK), "s3", "us-east-1")

    def request(self, method, path, query=None, body=b""):
        qs = urllib.parse.urlencode(sorted((query or {}).items()), quote_via=urllib.parse.quote)
        url = f"http://127.0.0.1:{self.port}{path}" + ("?" + qs if qs else "")
        req = AWSRequest(method=method, url=url, data=body)
        req.headers["x-amz-content-sha256"] = "UNSIGNED-PAYLOAD"
        self.auth.add_auth(req)
        self.conn.request(method, path + ("?" + qs if qs else ""), body=body or None,
                          headers=dict(req.headers.items()))
        r = self.conn.getresponse()
        data = r.read()
        if r.status >= 300:
            raise SystemExit(f"{method} {path}?{qs}: {r.status} {data[:300]!r}")
        return data

    def list_page(self, **q):
        q = dict({"list-type": "2"}, **q)
        t0 = time.perf_counter()
        body = self.request("GET", "/big", q)
        return time.perf_counter() - t0, body


KEY_RE = re.compile(rb"<Key>")
TOKEN_RE = re.compile(rb"<NextContinuationToken>([^<]*)</NextContinuationToken>")


def first_pages(cl, reps=21, **q):
    ts = []
    for _ in range(reps):
        t, body = cl.list_page(**{"max-keys": "1000", **q})
        ts.append(t)
    ts.sort()
    return {"median_ms": statistics.median(ts) * 1e3, "max_ms": ts[-1] * 1e3,
            "entries": len(KEY_RE.findall(body)) + body.count(b"<CommonPrefixes>")}


def full_listing(cl):
    t0 = time.perf_counter()
    keys, pages, token = 0, 0, None
    while True:
        q = {"max-keys": "1000"}
        if token:
            q["continuation-token"] = token
        _, body = cl.list_page(**q)
        keys += len(KEY_RE.findall(body))
        pages += 1
        m = TOKEN_RE.search(body)
        if not m:
            break
        token = m.group(1).decode()
    return {"seconds": time.perf_counter() - t0, "keys": keys, "pages": pages}


def main():
    os.sched_setaffinity(0, {1})
    shutil.rmtree(TMP, ignore_errors=True)
    os.makedirs(DRIVE)
    port = free_port()
    d = Daemon(port)
    d.start()
    cl = Client(port)
    cl.request("PUT", "/big")
    cl.request("PUT", "/big/template")
    d.stop()
    gen = os.path.join(ROOT, "build", "gen_objects")
    t0 = time.perf_counter()
    subprocess.run([gen, DRIVE, "big", "template", str(N)], check=True, stdout=subprocess.DEVNULL)
    gen_s = time.perf_counter() - t0
    os.remove(os.path.join(DRIVE, ".openlake", "index", "clean"))   # rebuild, as after a crash
    res = {"n": N, "generate_s": gen_s}
    res["start_rebuild_s"] = d.start()
    log = open(os.path.join(TMP, "daemon.log")).read()
    res["rebuild_log"] = re.findall(r"listing indexes: [^\n]*", log)[-1]
    cl = Client(port)
    res["first_page"] = first_pages(cl)
    res["first_page_delim"] = first_pages(cl, delimiter="/")
    res["first_page_prefix"] = first_pages(cl, prefix="dir0999/")
    res["full"] = [full_listing(cl) for _ in range(3)]
    assert all(f["keys"] == N + 1 for f in res["full"]), res["full"]
    res["stop_checkpoint_s"] = d.stop()
    res["start_load_s"] = d.start()
    cl = Client(port)
    res["first_page_after_load"] = first_pages(cl)
    d.stop()
    res["machine"] = json.loads(subprocess.run([sys.executable, os.path.join(
        ROOT, "bench", "http", "machine.py")], capture_output=True, text=True).stdout)
    shutil.rmtree(TMP, ignore_errors=True)
    os.makedirs(os.path.join(ROOT, "bench", "results"), exist_ok=True)
    out = os.path.join(ROOT, "bench", "results",
                       time.strftime("store-list-e2e-%Y%m%dT%H%M%SZ.json", time.gmtime()))
    json.dump(res, open(out, "w"), indent=1)
    print("raw results:", out)
    m = res["machine"]
    best = min(f["seconds"] for f in res["full"])
    worst = max(f["seconds"] for f in res["full"])
    fp, fd, fx = res["first_page"], res["first_page_delim"], res["first_page_prefix"]
    lines = [
        f"A bucket of {N:,} objects (keys `dir%04u/file%06u.bin`, 500 per folder) in a real "
        f"`openlaked` (one drive, `--threads 1`, pinned to CPU 0), listed with signed "
        f"ListObjectsV2 requests on one keep-alive HTTP connection from a client on CPU 1 "
        f"(`python3 bench/store/list_e2e.py`, part of `make bench-store`). The objects are "
        f"metadata files written by `bench/store/gen_objects` from a template PUT (1M PUTs "
        f"do not fit a session on this VM); the listing never reads them, only the "
        f"bucket's index, which the start rebuilt from them as after a crash. "
        f"Machine: {m.get('cpu', '?')}, {m.get('cores', '?')} cores, kernel "
        f"{m.get('kernel', '?')}.",
        "",
        "| What | Figure | Goal |",
        "|---|---|---|",
        f"| First page of 1000 keys (median of 21; max) | {fp['median_ms']:.2f} ms; "
        f"{fp['max_ms']:.2f} ms | < 50 ms |",
        f"| First page with delimiter `/` (1000 CommonPrefixes) | {fd['median_ms']:.2f} ms; "
        f"{fd['max_ms']:.2f} ms | |",
        f"| First page under prefix `dir0999/` (500 keys) | {fx['median_ms']:.2f} ms; "
        f"{fx['max_ms']:.2f} ms | |",
        f"| Full listing, {N + 1:,} keys in {res['full'][0]['pages']} pages (best of 3; "
        f"worst) | {best:.2f} s; {worst:.2f} s | < 10 s |",
        f"| Start with the index rebuilt from {N + 1:,} metadata files | "
        f"{res['start_rebuild_s']:.1f} s | |",
        f"| Clean stop (index checkpoint) | {res['stop_checkpoint_s']:.2f} s | |",
        f"| Start loading the checkpoint | {res['start_load_s']:.2f} s | |",
        f"| First page after that start | {res['first_page_after_load']['median_ms']:.2f} ms "
        f"| |",
        "",
        f"Daemon log of the rebuild: `{res['rebuild_log']}`. The client's time includes "
        f"signing each request and finding the keys in the XML (a regex, not a parser).",
        "",
    ]
    section = "\n".join(lines)
    print(section)
    replace_section(os.path.join(ROOT, "docs", "benchmarks.md"), "store-list-e2e", section,
                    heading="## Object store: listing 1,000,000 objects through S3 (issue 5)")


if __name__ == "__main__":
    main()
