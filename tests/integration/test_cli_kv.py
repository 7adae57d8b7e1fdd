"""`openlake kv stats|get|put|del` against a real two-shard daemon, over the
Unix socket (token found beside it) and over TCP (token given)."""
import json
import os
import re
import subprocess
import time
import urllib.request

import conftest


def cli(*args, stdin=None, env=None, cwd=None):
    env = {**{k: v for k, v in os.environ.items() if not k.startswith("OPENLAKE_")}, **(env or {})}
    return subprocess.run([conftest.bin_path("openlake"), *args], input=stdin,
                          capture_output=True, env=env, timeout=60, cwd=cwd)


def test_kv_put_get_del_stats(make_daemon, tmp_path):
    d = make_daemon(threads=2)
    sock = str(d.data / "kv.sock")
    tcp = ["--addr", f"127.0.0.1:{d.kv_port}", "--token-file", str(d.data / "kv.token")]

    r = cli("kv", "put", "greeting", "--value", "hello, cache", "--addr", sock)
    assert r.returncode == 0, r.stderr
    r = cli("kv", "get", "greeting", "--addr", sock)
    assert r.returncode == 0 and r.stdout == b"hello, cache"
    r = cli("kv", "get", "greeting", *tcp)  # the other transport sees it too
    assert r.returncode == 0 and r.stdout == b"hello, cache"

    blob = os.urandom(1 << 20)
    src = tmp_path / "blob.bin"
    src.write_bytes(blob)
    assert cli("kv", "put", "blob", "--file", str(src), *tcp).returncode == 0
    out = tmp_path / "back.bin"
    r = cli("kv", "get", "blob", "--out", str(out), "--addr", sock)
    assert r.returncode == 0, r.stderr
    assert out.read_bytes() == blob
    assert cli("kv", "put", "piped", "--addr", sock, stdin=b"from stdin").returncode == 0
    assert cli("kv", "get", "piped", "--addr", sock).stdout == b"from stdin"

    r = cli("kv", "put", "greeting", "--value", "again", "--addr", sock)
    assert r.returncode == 1 and b"EXISTS" in r.stderr
    r = cli("--json", "kv", "stats", "--addr", sock)
    assert r.returncode == 0, r.stderr
    st = json.loads(r.stdout)
    assert st["shards"] == 2 and st["entries"] >= 3 and st["commits"] >= 3
    r = cli("kv", "stats", "--addr", sock)
    assert r.returncode == 0 and b"entries" in r.stdout

    assert cli("kv", "del", "greeting", "--addr", sock).returncode == 0
    r = cli("kv", "get", "greeting", "--addr", sock)
    assert r.returncode == 1 and b"NOT_FOUND" in r.stderr
    # namespaces are separate
    r = cli("kv", "get", "blob", "--ns", "other", "--addr", sock)
    assert r.returncode == 1 and b"NOT_FOUND" in r.stderr


def test_kv_cli_errors(make_daemon):
    d = make_daemon()
    sock = str(d.data / "kv.sock")
    r = cli("kv", "get", "k", "--addr", sock, "--token", "wrong")
    assert r.returncode == 1 and b"token" in r.stderr
    assert b"warning: --token on the command line is readable by any local user" in r.stderr
    r = cli("kv", "get", "k", "--addr", sock, "--token", "t", "--token-file", "f")
    assert r.returncode == 2 and b"not both" in r.stderr
    r = cli("kv", "get", "k", "--addr", f"127.0.0.1:{d.kv_port}")
    assert r.returncode == 2 and b"--token" in r.stderr
    assert cli("kv").returncode == 2
    assert cli("kv", "get", "--addr", sock).returncode == 2
    r = cli("kv", "get", "k", "--adr", sock)
    assert r.returncode == 2 and b"--addr" in r.stderr
    r = cli("kv", "get", "k", "--addr", "/nonexistent/kv.sock", "--token", "t")
    assert r.returncode == 1 and b"openlaked running" in r.stderr
    r = cli("kv", "put", "x" * 200, "--value", "v", "--addr", sock)
    assert r.returncode == 2


def test_kv_token_file_from_the_environment(make_daemon):
    d = make_daemon()
    tcp = f"127.0.0.1:{d.kv_port}"
    r = cli("kv", "stats", "--addr", tcp, env={"OPENLAKE_KV_TOKEN_FILE": str(d.data / "kv.token")})
    assert r.returncode == 0 and b"warning" not in r.stderr, r.stderr
    r = cli("kv", "stats", "--addr", tcp, env={"OPENLAKE_KV_TOKEN_FILE": str(d.data / "kv.token"),
                                              "OPENLAKE_KV_TOKEN": "x"})
    assert r.returncode == 2 and b"both set" in r.stderr


def test_bench_kv_reports_and_checks_bytes(make_daemon):
    d = make_daemon(threads=2)
    r = cli("--json", "bench", "kv", "--addr", str(d.data / "kv.sock"), "--seconds", "1.2",
            "--value-size", "65536", "--batch", "8")
    assert r.returncode == 0, r.stderr
    res = {x["op"]: x for x in json.loads(r.stdout)}
    assert set(res) == {"put", "get", "lookup"}
    for op in ("put", "get", "lookup"):
        assert res[op]["keys_per_s"] > 0 and res[op]["misses"] == 0, res
        assert 0 < res[op]["p50_us"] <= res[op]["p99_us"] <= res[op]["p999_us"]
    assert res["get"]["gb_per_s"] > 0
    r = cli("bench", "kv", "--addr", f"127.0.0.1:{d.kv_port}",
            "--token", (d.data / "kv.token").read_text(), "--seconds", "0.6")
    assert r.returncode == 0 and b"inline over TCP" in r.stdout, r.stderr
    assert cli("bench").returncode == 2
    assert cli("bench", "kv", "--batch", "0").returncode == 2


def slab_metric(d, name):
    text = urllib.request.urlopen(f"{d.url}/_openlake/metrics", timeout=10).read().decode()
    return int(re.search(r'^%s\{tenant="default"\} (\d+)$' % name, text, re.M).group(1))


def test_bench_kv_says_whether_the_slab_was_cold_or_warm(make_daemon):
    # kv_slab.populate = "off": nothing has pages until put writes them
    d = make_daemon(args=["--kv-slab.populate", "off"])
    sock = str(d.data / "kv.sock")
    r = cli("bench", "kv", "--addr", sock, "--seconds", "0.6", "--value-size", "65536")
    assert r.returncode == 0, r.stderr
    assert re.search(rb"^put .* cold \(0%\)$", r.stdout, re.M), r.stdout
    # get began after put wrote: more of it had pages
    assert not re.search(rb"^get .* cold \(0%\)$", r.stdout, re.M), r.stdout
    assert re.search(rb"^slab: cold when put began: 0% of its 0\.\d GiB had pages "
                     rb"\(\d+% when put ended\); a put onto a page without one waits", r.stdout,
                     re.M), r.stdout
    # JSON: the same per op, the label following the share
    r = cli("--json", "bench", "kv", "--addr", sock, "--seconds", "0.6", "--value-size", "65536")
    assert r.returncode == 0, r.stderr
    for x in json.loads(r.stdout):
        f = x["slab_allocated_frac"]
        assert 0 < f <= 1 and x["slab"] == ("warm" if f >= 0.98 else "partly_warm"), x
    # over TCP the bench does not map the slab: it says it cannot tell
    r = cli("--json", "bench", "kv", "--addr", f"127.0.0.1:{d.kv_port}",
            "--token-file", str(d.data / "kv.token"), "--seconds", "0.3", "--value-size", "65536")
    assert r.returncode == 0, r.stderr
    assert all(x["slab"] == "unknown" and x["slab_allocated_frac"] is None
               for x in json.loads(r.stdout)), r.stdout
    d.stop()

    # the default, "background": once populated, the bench finds it warm
    d = make_daemon()
    size = slab_metric(d, "openlake_kv_tenant_slab_bytes")
    deadline = time.time() + 60
    while slab_metric(d, "openlake_kv_tenant_slab_populated_bytes") < size:
        assert time.time() < deadline, d.stderr()
        time.sleep(0.05)
    r = cli("bench", "kv", "--addr", str(d.data / "kv.sock"), "--seconds", "0.6",
            "--value-size", "65536")
    assert r.returncode == 0, r.stderr
    assert re.search(rb"^put .* warm \(100%\)$", r.stdout, re.M), r.stdout
    assert re.search(rb"^slab: warm: 100% of its 0\.\d GiB had pages when put began$", r.stdout,
                     re.M), r.stdout


def test_bench_client_kv_and_s3(make_daemon):
    d = make_daemon(threads=2)
    tok = str(d.data / "kv.token")
    creds = str(d.data / "s3.credentials")
    runs = [
        ("kv", f"kv://127.0.0.1:{d.kv_port}", "write", ["--token-file", tok]),
        ("kv", f"kv://127.0.0.1:{d.kv_port}", "read", ["--token-file", tok]),
        ("kv", f"kv:{d.data / 'kv.sock'}", "read", ["--token-file", tok]),
        ("s3", f"http://127.0.0.1:{d.port}", "write", ["--credentials", creds]),
        ("s3", f"http://127.0.0.1:{d.port}", "read", ["--credentials", creds]),
    ]
    for kind, target, op, extra in runs:
        r = cli("--json", "bench", "client", "--target", target, "--op", op, "--seconds", "0.8",
                "--size", "65536", "--concurrency", "3", "--keys", "4", *extra)
        assert r.returncode == 0, (target, op, r.stdout, r.stderr)
        res = json.loads(r.stdout)
        assert res["op"] == op and res["concurrency"] == 3 and res["size"] == 65536
        assert res["ops"] > 0 and res["errors"] == 0 and res["error"] is None, res
        assert 0 < res["p50_us"] <= res["p99_us"] <= res["p999_us"]
        assert res["gb_per_s"] > 0 and 0.7 < res["seconds"] < 5
    # a named bucket (made when missing), read back after its own writes
    r = cli("bench", "client", "--target", f"http://127.0.0.1:{d.port}", "--op", "read",
            "--seconds", "0.3", "--bucket", "openlake-bench", "--credentials", creds)
    assert r.returncode == 0 and b"0 errors" in r.stdout, r.stdout
    # a wrong token: refused, exit 1, said why
    bad = d.data.parent / "bad.token"
    bad.write_text("0" * 64 + "\n")
    bad.chmod(0o600)
    r = cli("bench", "client", "--target", f"kv://127.0.0.1:{d.kv_port}", "--op", "write",
            "--seconds", "0.3", "--token-file", str(bad))
    assert r.returncode == 1 and b"first error" in r.stdout, (r.stdout, r.stderr)
    # usage
    for args in (["--target", f"kv://h:1,http://h:2", "--op", "read"],
                 ["--target", ",", "--op", "read"],
                 ["--target", "kv://h:1,kv://h:2,kv://h:3", "--op", "read", "--concurrency", "2"],
                 ["--target", ",".join(["kv://h:1"] * 65), "--op", "read",
                  "--concurrency", "100"],
                 ["--op", "read"], ["--target", "kv://h:1"], ["--target", "https://h:1",
                 "--op", "read"], ["--target", "kv://h:1", "--op", "scan"],
                 ["--target", "kv://h:1", "--op", "read", "--size", "0"],
                 ["--target", "kv://h:1", "--op", "read", "--bucket", "b"]):
        assert cli("bench", "client", *args).returncode == 2, args


def test_bench_client_spreads_workers_over_a_list_of_targets(make_daemon, tmp_path):
    """--target A,B: worker i on target i mod 2, so both nodes of a list
    take load (KV with one token, S3 with one credential); the figures are
    the whole list's."""
    tok = tmp_path / "kv.token"
    tok.write_text(os.urandom(32).hex() + "\n")
    tok.chmod(0o600)
    skf = tmp_path / "sk"
    skf.write_text("bench-list-secret-0123\n")
    skf.chmod(0o600)
    ds = []
    for _ in range(2):
        d = make_daemon(args=["--kv-token-file", str(tok)], start=False)
        d.env.update({"OPENLAKE_ACCESS_KEY": "bench-list", "OPENLAKE_SECRET_KEY_FILE": str(skf)})
        ds.append(d.start())

    def used(d):
        m = urllib.request.urlopen(d.url + "/_openlake/metrics").read().decode()
        return sum(int(v) for v in re.findall(r"^openlake_kv_tenant_used_bytes\{[^}]*\} (\d+)$",
                                              m, re.M))

    def s3_ok(d):   # responses 200 (the bench's, and a few metrics reads)
        m = urllib.request.urlopen(d.url + "/_openlake/metrics").read().decode()
        return sum(int(v) for v in re.findall(
            r'^openlake_http_requests_total\{[^}]*code="200"\} (\d+)$', m, re.M))
    kv_list = ",".join(f"kv://127.0.0.1:{d.kv_port}" for d in ds)
    s3_list = ",".join(f"http://127.0.0.1:{d.port}" for d in ds)
    for target, extra in ((kv_list, ["--token-file", str(tok)]),
                          (s3_list, ["--access-key", "bench-list", "--secret-key-file", str(skf)])):
        for op in ("write", "read"):
            r = cli("--json", "bench", "client", "--target", target, "--op", op, "--seconds",
                    "0.5", "--size", "65536", "--concurrency", "4", "--keys", "4", *extra)
            assert r.returncode == 0, (target, op, r.stdout, r.stderr)
            res = json.loads(r.stdout)
            assert res["targets"] == 2 and res["ops"] > 0 and res["errors"] == 0, res
    assert all(used(d) > 0 for d in ds), [used(d) for d in ds]
    assert all(s3_ok(d) > 20 for d in ds), [s3_ok(d) for d in ds]
