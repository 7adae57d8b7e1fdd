"""TLS on the node RPC (rpc_tls_cert, rpc_tls_key, rpc_tls_ca;
docs/node-protocol.md "Transports"): real etcd, real daemons on loopback,
certificates made with the openssl command.

Two nodes whose certificates the cluster's CA signed connect over TLS and
serve the KV pool to each other (a value put on one is read byte-exact on
the other, fetched over the node RPC); a third node whose certificate
another CA signed, or one without TLS, never becomes a peer of theirs
while the two keep serving; TLS settings that cannot work stop the start.
"""
import json
import os
import re
import subprocess
import time

import pytest

import conftest
from test_cli_kv import cli
from test_cluster import ETCD, etcd, wait_for
from test_cluster_kv import homed_on, joined, kpm, kv, settled_pushes
from test_cluster_rpc import metric, secret, up
from test_cluster_ucx import HAVE_UCX
from test_http import hermetic_openlake_env

assert hermetic_openlake_env  # autouse fixture, imported to apply here too
assert etcd                   # the fixture: one etcd member per test

pytestmark = pytest.mark.skipif(not ETCD, reason="etcd is not installed (scripts/deps.sh test "
                                "installs etcd-server)")


def pki(tmp_path):
    """CA 1 (the cluster's) signs n1, n2 and n3; CA 2 signs x."""
    d = tmp_path / "pki"
    d.mkdir()

    def openssl(*a):
        subprocess.run(["openssl", *a], cwd=d, check=True, capture_output=True)

    ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"]
    for ca in ("ca1", "ca2"):
        openssl("req", "-x509", *ec, "-keyout", f"{ca}.key", "-out", f"{ca}.pem", "-days", "2",
                "-subj", f"/CN={ca}")
    for n, ca in (("n1", "ca1"), ("n2", "ca1"), ("n3", "ca1"), ("x", "ca2")):
        openssl("req", *ec, "-keyout", f"{n}.key", "-out", f"{n}.csr", "-subj", f"/CN={n}")
        openssl("x509", "-req", "-in", f"{n}.csr", "-CA", f"{ca}.pem", "-CAkey", f"{ca}.key",
                "-set_serial", "1", "-days", "2", "-out", f"{n}.pem")
        (d / f"{n}.key").chmod(0o600)
    return d


def tls(p, name):
    """The flags of a node presenting name's certificate, trusting CA 1."""
    return ["--rpc-tls-cert", str(p / f"{name}.pem"), "--rpc-tls-key", str(p / f"{name}.key"),
            "--rpc-tls-ca", str(p / "ca1.pem")]


def kv_node(make_daemon, etcd, nid, s, tok, extra):
    d = make_daemon(args=[
        "--cluster.name", "c1", "--cluster.etcd", etcd.url, "--self-id", str(nid),
        "--cluster.lease-ttl-secs", "2", "--rpc-addr", f"127.0.0.1:{conftest.free_port()}",
        "--cluster.etcd-timeout-ms", "1000", "--cluster.secret-file", s,
        "--kv-token-file", tok, "--cluster.kv-timeout-ms", "1000", *extra])
    return d


def token(tmp_path):
    tok = tmp_path / "kv.token"
    tok.write_text(os.urandom(32).hex() + "\n")
    tok.chmod(0o600)
    return str(tok)


def failures(d):
    return metric(d, "openlake_rpc_tls_handshake_failures_total")


def test_tls_nodes_share_the_pool_and_refuse_another_cas(etcd, make_daemon, tmp_path):
    p, s, tok = pki(tmp_path), secret(tmp_path), token(tmp_path)
    a = kv_node(make_daemon, etcd, 1, s, tok, tls(p, "n1"))
    b = kv_node(make_daemon, etcd, 2, s, tok, tls(p, "n2"))
    joined([a, b])
    for d in (a, b):
        assert re.search(r"node rpc: listening on \S+ \(tcp\+tls\), cluster c1", d.stderr())
        assert failures(d) == 0
    marker = b"OPENLAKE-TLS-MARKER-"
    vals = {f"block-{i}": marker * 50 + os.urandom(70000 + 37 * i) for i in range(30)}
    for k, v in vals.items():
        r = kv(a, tok, "put", k, stdin=v)
        assert r.returncode == 0, r.stderr
    pushed = settled_pushes(a)
    assert 3 <= pushed <= 27
    for k, v in vals.items():
        r = kv(b, tok, "get", k)
        assert r.returncode == 0 and r.stdout == v, (k, r.stderr)
    assert kpm(b, "fetched_keys_total") == 30 - pushed   # over the node RPC, in TLS

    # node 3's certificate is CA 2's: refused both ways, never a peer
    x = kv_node(make_daemon, etcd, 3, s, tok, tls(p, "x"))
    wait_for(lambda: failures(a) > 0 and failures(b) > 0 and failures(x) > 0,
             "handshakes with node 3 refused")
    time.sleep(0.5)
    assert up(a, 3) == 0 and up(b, 3) == 0 and up(x, 1) == 0 and up(x, 2) == 0
    assert metric(x, "openlake_rpc_peer_connects_total", peer=1) == 0
    assert "certificate verify failed" in a.stderr() + b.stderr() + x.stderr()
    # and the two keep serving each other: keys homed on node 1 among the
    # three, put on a, read on b
    assert up(a, 2) == 1 and up(b, 1) == 1
    late = {k: os.urandom(5000) for k in homed_on(1, 3, 5, "late")}
    for k, v in late.items():
        assert kv(a, tok, "put", k, stdin=v).returncode == 0
    before = kpm(b, "fetched_keys_total")
    for k, v in late.items():
        r = kv(b, tok, "get", k)
        assert r.returncode == 0 and r.stdout == v, (k, r.stderr)
    assert kpm(b, "fetched_keys_total") == before + len(late)


def test_a_client_without_a_certificate_or_on_tls_1_2_is_refused(etcd, make_daemon, tmp_path):
    """Python's own TLS client at a node's rpc_addr: without a certificate
    (TLS 1.3: the node refuses once the client's handshake is done), and
    with one of the cluster's CA but TLS 1.2 only: refused, counted, and
    the node goes on."""
    import socket
    import ssl
    p, s, tok = pki(tmp_path), secret(tmp_path), token(tmp_path)
    a = kv_node(make_daemon, etcd, 1, s, tok, tls(p, "n1"))
    port = int(a.args[a.args.index("--rpc-addr") + 1].rsplit(":", 1)[1])

    def attempt(ctx):
        """What the node answered: b"" (closed), or the TLS error."""
        with socket.create_connection(("127.0.0.1", port), timeout=5) as raw:
            try:
                with ctx.wrap_socket(raw) as t:
                    t.sendall(b"\0" * 64)
                    return t.recv(1)
            except (ssl.SSLError, ConnectionError) as e:
                return e

    def client(cert=None):
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
        ctx.check_hostname = False
        ctx.load_verify_locations(str(p / "ca1.pem"))
        if cert:
            ctx.load_cert_chain(str(p / f"{cert}.pem"), str(p / f"{cert}.key"))
        return ctx

    got = attempt(client())
    assert got == b"" or isinstance(got, (ssl.SSLError, ConnectionError)), got
    wait_for(lambda: failures(a) == 1, "the certificate-less client counted")
    old = client("n2")
    old.maximum_version = ssl.TLSVersion.TLSv1_2
    got = attempt(old)
    assert isinstance(got, ssl.SSLError), got
    wait_for(lambda: failures(a) == 2, "the TLS 1.2 client counted")
    assert "certificate" in a.stderr() and a.is_ready()


def test_a_node_without_tls_is_no_peer_of_tls_nodes(etcd, make_daemon, tmp_path):
    p, s, tok = pki(tmp_path), secret(tmp_path), token(tmp_path)
    a = kv_node(make_daemon, etcd, 1, s, tok, tls(p, "n1"))
    b = kv_node(make_daemon, etcd, 2, s, tok, tls(p, "n2"))
    joined([a, b])
    c = kv_node(make_daemon, etcd, 3, s, tok, [])
    assert re.search(r"node rpc: listening on \S+ \(tcp\), cluster c1", c.stderr())
    # c's plaintext HELLO is no TLS; a's ClientHello is no frame to c
    wait_for(lambda: failures(a) > 0 and failures(b) > 0 and
             metric(c, "openlake_rpc_refused_total", cause="protocol") > 0,
             "the plaintext node refused both ways")
    time.sleep(0.5)
    assert up(a, 3) == 0 and up(b, 3) == 0 and up(c, 1) == 0 and up(c, 2) == 0
    assert metric(c, "openlake_rpc_peer_connects_total", peer=1) == 0
    assert up(a, 2) == 1 and up(b, 1) == 1


def test_tls_settings_that_cannot_work_stop_the_start(etcd, make_daemon, tmp_path):
    p, s = pki(tmp_path), secret(tmp_path)
    enc = p / "n1-enc.key"
    subprocess.run(["openssl", "pkey", "-in", str(p / "n1.key"), "-aes256", "-passout",
                    "pass:secret", "-out", str(enc)], check=True, capture_output=True)
    enc.chmod(0o600)
    base = ["--cluster.name", "c1", "--cluster.etcd", etcd.url, "--self-id", "1",
            "--rpc-addr", f"127.0.0.1:{conftest.free_port()}", "--cluster.secret-file", s]
    cases = [
        (["--rpc-tls-cert", str(p / "n1.pem")],
         "--rpc-tls-cert: given without rpc_tls_key and rpc_tls_ca"),
        *([(["--transport", "ucx", *tls(p, "n1")],
             "TLS is for the TCP transport; UCX encrypts nothing")] if HAVE_UCX else []),
        (["--rpc-tls-cert", str(p / "n1.pem"), "--rpc-tls-key", str(p / "n2.key"),
          "--rpc-tls-ca", str(p / "ca1.pem")],
         "rpc_tls_key: cannot use private key (PEM, not encrypted) " + str(p / "n2.key")),
        (["--rpc-tls-cert", str(p / "n1.pem"), "--rpc-tls-key", str(enc),
          "--rpc-tls-ca", str(p / "ca1.pem")],      # a passphrase: refused, not prompted for
         "rpc_tls_key: cannot use private key (PEM, not encrypted) " + str(enc)),
        (["--rpc-tls-cert", str(p / "missing.pem"), "--rpc-tls-key", str(p / "n1.key"),
          "--rpc-tls-ca", str(p / "ca1.pem")],
         "rpc_tls_cert: cannot use certificate chain " + str(p / "missing.pem")),
        (["--rpc-tls-cert", str(p / "n1.pem"), "--rpc-tls-key", str(p / "n1.key"),
          "--rpc-tls-ca", str(p / "n1.key")],
         "rpc_tls_ca: cannot use CA bundle " + str(p / "n1.key")),
    ]
    for args, msg in cases:
        d = make_daemon(args=[*base, *args], start=False)
        d.start(wait=False)
        rc = d.proc.wait(timeout=20)
        assert rc != 0 and msg in d.stderr(), d.stderr()
        d.stop(expect_rc=rc)
    # a key group or others may read: a warning, and it runs
    key = p / "n3.key"
    key.chmod(0o640)
    d = make_daemon(args=[*base, "--rpc-tls-cert", str(p / "n3.pem"), "--rpc-tls-key", str(key),
                          "--rpc-tls-ca", str(p / "ca1.pem")])
    assert f"--rpc-tls-key: {key} is mode 0640: group or others may read it" in d.stderr()


def test_etcd_over_https_with_client_certificates(make_daemon, tmp_path):
    """etcd serving https and asking for client certificates
    (--client-cert-auth): a node with cluster.etcd_tls_ca, _cert and _key
    joins and registers, and `cluster status` reads it with --etcd-ca,
    --etcd-cert, --etcd-key; a node with the CA but no certificate, and
    one trusting another CA, serve alone, never registered, their logs naming etcd's
    failure (for the one without a certificate, whatever its TLS library
    says once etcd refused the handshake: the words vary with timing)."""
    p = pki(tmp_path)

    def openssl(*a):
        subprocess.run(["openssl", *a], cwd=p, check=True, capture_output=True)
    # etcd's own certificate, for 127.0.0.1 (its name checked by the client)
    (p / "san.cnf").write_text("subjectAltName = IP:127.0.0.1\n")
    openssl("req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
            "-keyout", "etcd.key", "-out", "etcd.csr", "-subj", "/CN=etcd")
    openssl("x509", "-req", "-in", "etcd.csr", "-CA", "ca1.pem", "-CAkey", "ca1.key",
            "-set_serial", "7", "-days", "2", "-extfile", "san.cnf", "-out", "etcd.pem")
    client, peer = conftest.free_ports(2)
    url = f"https://127.0.0.1:{client}"
    log = open(tmp_path / "etcd-tls.log", "w")
    e = subprocess.Popen(
        [ETCD, "--name", "m0", "--data-dir", str(tmp_path / "etcd-tls"),
         "--listen-client-urls", url, "--advertise-client-urls", url,
         "--listen-peer-urls", f"http://127.0.0.1:{peer}",
         "--initial-advertise-peer-urls", f"http://127.0.0.1:{peer}",
         "--initial-cluster", f"m0=http://127.0.0.1:{peer}",
         "--cert-file", str(p / "etcd.pem"), "--key-file", str(p / "etcd.key"),
         "--trusted-ca-file", str(p / "ca1.pem"), "--client-cert-auth"],
        stdout=log, stderr=subprocess.STDOUT)
    try:
        def healthy():
            r = subprocess.run(["curl", "-sf", "--cacert", str(p / "ca1.pem"), "--cert",
                                str(p / "n1.pem"), "--key", str(p / "n1.key"), url + "/health"],
                               capture_output=True, text=True)
            return r.returncode == 0 and '"health":"true"' in r.stdout
        wait_for(healthy, "etcd over https", timeout=30)
        s = secret(tmp_path)
        base = ["--cluster.name", "c1", "--cluster.etcd", url, "--self-id", "1",
                "--rpc-addr", f"127.0.0.1:{conftest.free_port()}", "--cluster.secret-file", s,
                "--cluster.etcd-timeout-ms", "1000", "--cluster.etcd-tls-ca", str(p / "ca1.pem")]
        d = make_daemon(args=[*base, "--cluster.etcd-tls-cert", str(p / "n1.pem"),
                              "--cluster.etcd-tls-key", str(p / "n1.key")])
        wait_for(lambda: metric(d, "openlake_cluster_registered") == 1, "registered over https")
        r = cli("--json", "cluster", "status", "--etcd", url, "--cluster", "c1",
                "--etcd-ca", str(p / "ca1.pem"), "--etcd-cert", str(p / "n2.pem"),
                "--etcd-key", str(p / "n2.key"))
        assert r.returncode == 0, (r.stdout, r.stderr)
        assert [n["id"] for n in json.loads(r.stdout)["nodes"]] == [1]
        # no client certificate: etcd refuses the handshake; another CA: the
        # node refuses etcd's certificate. Each serves alone, never
        # registered, its log saying why.
        for nid, ca, extra, why in (
                (2, "ca1", [], f"cluster c1: etcd: register: {url}/"),
                (3, "ca2", ["--cluster.etcd-tls-cert", str(p / "x.pem"),
                            "--cluster.etcd-tls-key", str(p / "x.key")],
                 "SSL peer certificate")):
            bad = make_daemon(args=[
                "--cluster.name", "c1", "--cluster.etcd", url, "--self-id", str(nid),
                "--rpc-addr", f"127.0.0.1:{conftest.free_port()}", "--cluster.secret-file", s,
                "--cluster.etcd-timeout-ms", "1000", "--cluster.etcd-tls-ca",
                str(p / f"{ca}.pem"), *extra])
            wait_for(lambda: why in bad.stderr(), f"node {nid}'s etcd error")
            assert metric(bad, "openlake_cluster_registered") == 0
            assert metric(bad, "openlake_cluster_etcd_up") == 0
        r = cli("--json", "cluster", "status", "--etcd", url, "--cluster", "c1",
                "--etcd-ca", str(p / "ca1.pem"), "--etcd-cert", str(p / "n2.pem"),
                "--etcd-key", str(p / "n2.key"))
        assert [n["id"] for n in json.loads(r.stdout)["nodes"]] == [1]
    finally:
        e.kill()
        e.wait()
        log.close()
