"""How clients reach the S3 API: virtual-host-style addressing under the
configured `s3_domain`, and TLS on the S3 port (`s3_tls_cert` /
`s3_tls_key`). Real daemons, real boto3 and raw signed requests.
"""
import http.client
import io
import os
import socket
import ssl
import subprocess
import urllib.request
import warnings

import boto3
import botocore
import pytest
from boto3.s3.transfer import TransferConfig
from botocore.auth import SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.config import Config
from botocore.credentials import Credentials

from conftest import raw_request

from test_s3 import AK, SK, client, error_of, s3d  # noqa: F401

MiB = 1024 * 1024


def vhost(d, method, host, path, body=b""):
    """A SigV4-signed request for http://<host>:<port><path>, sent to the
    daemon's loopback address with that Host header."""
    url = f"http://{host}:{d.port}{path}"
    req = AWSRequest(method=method, url=url, data=body)
    req.headers["x-amz-content-sha256"] = "UNSIGNED-PAYLOAD"
    SigV4Auth(Credentials(AK, SK), "s3", "us-east-1").add_auth(req)
    conn = http.client.HTTPConnection("127.0.0.1", d.port, timeout=10)
    hdrs = dict(req.headers.items())
    hdrs["Host"] = f"{host}:{d.port}"
    conn.request(method, path, body=body or None, headers=hdrs)
    r = conn.getresponse()
    out = r.status, r.read()
    conn.close()
    return out


def test_virtual_host_style_under_s3_domain(make_daemon):
    d = make_daemon(args=["--mode", "s3", "--s3-domain", "s3.example.test"],
                    env={"OPENLAKE_ACCESS_KEY": AK, "OPENLAKE_SECRET_KEY": SK})
    c = client(d)
    c.create_bucket(Bucket="vbkt")
    # bucket in the host name, key in the path
    assert vhost(d, "PUT", "vbkt.s3.example.test", "/dir/obj.txt", b"hello vhost")[0] == 200
    assert c.get_object(Bucket="vbkt", Key="dir/obj.txt")["Body"].read() == b"hello vhost"
    assert vhost(d, "GET", "vbkt.s3.example.test", "/dir/obj.txt") == (200, b"hello vhost")
    st, body = vhost(d, "GET", "vbkt.s3.example.test", "/?list-type=2")
    assert st == 200 and b"<Key>dir/obj.txt</Key>" in body
    # the bare domain and other hosts are path style
    assert vhost(d, "GET", "s3.example.test", "/vbkt/dir/obj.txt") == (200, b"hello vhost")
    assert vhost(d, "GET", "localhost", "/vbkt/dir/obj.txt") == (200, b"hello vhost")
    # a host naming an invalid bucket under the domain
    st, body = vhost(d, "GET", "bad_bucket.s3.example.test", "/k")
    assert st == 400 and b"InvalidBucketName" in body
    st, body = vhost(d, "GET", "nobkt.s3.example.test", "/k")
    assert st == 404 and b"NoSuchBucket" in body


def test_without_s3_domain_hosts_are_path_style(s3d):
    c = client(s3d)
    c.create_bucket(Bucket="pbkt")
    c.put_object(Bucket="pbkt", Key="k", Body=b"v")
    # "pbkt.s3.example.test" means nothing special without s3_domain
    assert vhost(s3d, "GET", "pbkt.s3.example.test", "/pbkt/k") == (200, b"v")


def make_cert(tmp_path, name="server"):
    """A self-signed certificate for 127.0.0.1 / localhost (openssl CLI)."""
    cert, key = tmp_path / f"{name}.pem", tmp_path / f"{name}.key"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt",
                    "ec_paramgen_curve:prime256v1", "-nodes", "-keyout", str(key), "-out",
                    str(cert), "-days", "1", "-subj", "/CN=localhost", "-addext",
                    "subjectAltName=IP:127.0.0.1,DNS:localhost"],
                   check=True, capture_output=True)
    return cert, key


def tls_daemon(make_daemon, tmp_path):
    cert, key = make_cert(tmp_path)
    d = make_daemon(args=["--mode", "s3", "--s3-tls-cert", str(cert), "--s3-tls-key", str(key)],
                    env={"OPENLAKE_ACCESS_KEY": AK, "OPENLAKE_SECRET_KEY": SK}, start=False)
    d.ssl_context = ssl.create_default_context(cafile=str(cert))
    d.start()
    return d, cert


def test_tls_on_the_s3_port(make_daemon, tmp_path):
    d, cert = tls_daemon(make_daemon, tmp_path)
    assert d.url.startswith("https://")
    c = boto3.client(
        "s3", endpoint_url=d.url, aws_access_key_id=AK, aws_secret_access_key=SK,
        region_name="us-east-1", verify=str(cert), config=Config(retries={"max_attempts": 1}))
    c.create_bucket(Bucket="tlsb")
    big = os.urandom(9 * MiB + 123)           # many TLS records, both directions
    c.put_object(Bucket="tlsb", Key="big", Body=big)   # boto3's default: CRC32 trailer
    assert c.get_object(Bucket="tlsb", Key="big")["Body"].read() == big
    r = c.get_object(Bucket="tlsb", Key="big", Range="bytes=5000000-5000099")
    assert r["Body"].read() == big[5000000:5000100]
    cfg = TransferConfig(multipart_threshold=5 * MiB, multipart_chunksize=5 * MiB,
                         max_concurrency=2)
    data = os.urandom(11 * MiB)
    c.upload_fileobj(io.BytesIO(data), "tlsb", "mpu", Config=cfg)
    out = io.BytesIO()
    c.download_fileobj("tlsb", "mpu", out, Config=cfg)
    assert out.getvalue() == data
    keys = [o["Key"] for o in c.list_objects_v2(Bucket="tlsb")["Contents"]]
    assert keys == ["big", "mpu"]
    # errors travel over TLS as S3 error documents
    assert error_of(lambda: c.get_object(Bucket="tlsb", Key="nope"))[:2] == ("NoSuchKey", 404)
    # admin paths share the port, so they are under TLS too
    with urllib.request.urlopen(d.url + "/_openlake/metrics", context=d.ssl_context,
                                timeout=10) as m:
        text = m.read()
        assert m.status == 200 and b"openlake_http_requests_total" in text
    # TLS copies the bytes it encrypts: no GET is sent from a file mapping
    assert b"\nopenlake_store_get_mapped_bytes_total 0\n" in text
    # an untrusted certificate is refused by the client
    bad = boto3.client("s3", endpoint_url=d.url, aws_access_key_id=AK,
                       aws_secret_access_key=SK, region_name="us-east-1",
                       config=Config(retries={"max_attempts": 1}))
    with pytest.raises(botocore.exceptions.SSLError):
        bad.list_buckets()


def test_tls_port_refuses_plain_http_and_garbage(make_daemon, tmp_path):
    d, cert = tls_daemon(make_daemon, tmp_path)
    # plain HTTP to a TLS port: no HTTP answer, the connection is closed
    out = raw_request(d.port, b"GET /_openlake/health/live HTTP/1.1\r\nHost: x\r\n\r\n")
    assert not out.startswith(b"HTTP/")
    # bytes that are not TLS after a good handshake: closed, the daemon serves on
    ctx = ssl.create_default_context(cafile=str(cert))
    with socket.create_connection(("127.0.0.1", d.port), timeout=10) as raw:
        with ctx.wrap_socket(raw, server_hostname="localhost") as s:
            s.sendall(b"GET /_openlake/health/live HTTP/1.1\r\nHost: x\r\n\r\n")
            assert s.recv(4096).startswith(b"HTTP/1.1 200")
            os.write(s.fileno(), b"\x00" * 300)   # not a TLS record
            try:
                assert s.recv(4096) == b""
            except (ssl.SSLError, ConnectionResetError):
                pass
    # a client that only speaks TLS 1.1 is refused
    old = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    old.load_verify_locations(cafile=str(cert))
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DeprecationWarning)
            old.minimum_version = old.maximum_version = ssl.TLSVersion.TLSv1_1
    except (ValueError, ssl.SSLError):
        old = None
    if old is not None:
        with socket.create_connection(("127.0.0.1", d.port), timeout=10) as raw:
            with pytest.raises((ssl.SSLError, ConnectionResetError)):
                old.wrap_socket(raw, server_hostname="localhost")
    with urllib.request.urlopen(d.url + "/_openlake/health/live", context=d.ssl_context,
                                timeout=10) as r:
        assert r.status == 200


def test_tls_setting_errors_stop_the_start(make_daemon, tmp_path):
    cert, key = make_cert(tmp_path)
    other_cert, other_key = make_cert(tmp_path, "other")
    cases = [
        (["--s3-tls-cert", str(cert)], "--s3-tls-cert: given without s3_tls_key"),
        (["--s3-tls-cert", str(cert), "--s3-tls-key", str(tmp_path / "missing.key")],
         "s3_tls_key: cannot use private key (PEM, not encrypted) "
         + str(tmp_path / "missing.key")),
        (["--s3-tls-cert", str(tmp_path / "missing.pem"), "--s3-tls-key", str(key)],
         "s3_tls_cert: cannot use certificate chain " + str(tmp_path / "missing.pem")),
        (["--s3-tls-cert", str(cert), "--s3-tls-key", str(other_key)],
         "s3_tls_key: cannot use private key (PEM, not encrypted) "
         + str(other_key)),   # OpenSSL: mismatch
    ]
    for args, msg in cases:
        d = make_daemon(args=["--mode", "s3", *args], start=False)
        d.start(wait=False)
        rc = d.proc.wait(timeout=20)
        assert rc == 2 and msg in d.stderr(), d.stderr()
        d.stop(expect_rc=2)


def test_tls_handshake_trickled_byte_by_byte_is_cut_off(make_daemon, tmp_path):
    """The head deadline covers the handshake too: a client that sends its
    records a byte at a time does not keep a TLS connection forever."""
    import time
    cert, key = make_cert(tmp_path)
    d = make_daemon(args=["--mode", "s3", "--s3-tls-cert", str(cert), "--s3-tls-key", str(key),
                          "--http.header-timeout-ms", "1000"],
                    env={"OPENLAKE_ACCESS_KEY": AK, "OPENLAKE_SECRET_KEY": SK}, start=False)
    d.ssl_context = ssl.create_default_context(cafile=str(cert))
    d.start()
    t0 = time.time()
    closed = False
    with socket.create_connection(("127.0.0.1", d.port), timeout=1) as s:
        hello = b"\x16\x03\x01\x02\x00" + b"\x01" * 200      # a record never finished
        for b in hello:
            try:
                s.sendall(bytes([b]))
                s.settimeout(0.25)
                if s.recv(100) == b"":
                    closed = True
                    break
            except socket.timeout:
                continue
            except (BrokenPipeError, ConnectionResetError):
                closed = True
                break
            if time.time() - t0 > 40:
                break
    # cut by the 1 s head deadline, not the 60 s idle timeout (a loaded
    # machine may take its time)
    assert closed and time.time() - t0 < 30, time.time() - t0
    with urllib.request.urlopen(d.url + "/_openlake/health/live", context=d.ssl_context,
                                timeout=10) as r:
        assert r.status == 200


@pytest.mark.parametrize("tls", [False, True], ids=["plain", "tls"])
def test_responses_wait_for_output_buffers_instead_of_stalling(make_daemon, tmp_path, tls):
    """With few output buffers (`http.output_buffers` = 16 on one core:
    256 KiB), many large GETs at once empty the pool. A response that finds
    it empty with no send of its own in flight (plain: the next stripe; TLS:
    ciphertext stuck in the session) waits until another connection gives
    buffers back and then goes on; before, it waited for a completion that
    never came, until the client gave up (20 s here). A response whose head
    finds no buffer at all is cut (a reset the client retries), not left
    hanging."""
    import concurrent.futures
    import hashlib
    import time
    args = ["--mode", "s3", "--http.output-buffers", "16"]
    cert = None
    if tls:
        cert, key = make_cert(tmp_path)
        args += ["--s3-tls-cert", str(cert), "--s3-tls-key", str(key)]
    d = make_daemon(args=args, env={"OPENLAKE_ACCESS_KEY": AK, "OPENLAKE_SECRET_KEY": SK},
                    start=False)
    if tls:
        d.ssl_context = ssl.create_default_context(cafile=str(cert))
    d.start()
    read_timeout = 60   # resets (a head that found no buffer) are retried: up to 9 times,
                        # as a loaded machine can reset one GET several times in a row;
                        # "legacy" retries have no quota (botocore's default "standard"
                        # mode stops retrying every request after ~50 retries in all)
    c = boto3.client("s3", endpoint_url=d.url, aws_access_key_id=AK, aws_secret_access_key=SK,
                     region_name="us-east-1", verify=str(cert) if tls else None,
                     config=Config(retries={"max_attempts": 10, "mode": "legacy"},
                                   read_timeout=read_timeout, max_pool_connections=24))
    c.create_bucket(Bucket="few")
    body = os.urandom(6 * MiB + 5)
    want = hashlib.sha256(body).hexdigest()
    c.put_object(Bucket="few", Key="o", Body=body)

    def get(_):
        t0 = time.monotonic()
        h = hashlib.sha256(c.get_object(Bucket="few", Key="o")["Body"].read()).hexdigest()
        return h, time.monotonic() - t0

    with concurrent.futures.ThreadPoolExecutor(24) as ex:
        got = list(ex.map(get, range(72)))
    assert {h for h, _ in got} == {want}
    # A GET that stalled sat out a whole read timeout before its retry; one
    # that waited its turn for buffers did not (a slow machine is slow, not
    # stalled, so no bound on the total).
    slowest = max(t for _, t in got)
    assert slowest < read_timeout, f"a GET waited for a read timeout ({slowest:.1f} s)"


def test_tls_connections_keep_the_kernels_send_buffer(make_daemon, tmp_path):
    """http.loopback_sndbuf caps plain-HTTP connections from this host only:
    a TLS response is staged in the core's output pool, which a small kernel
    buffer would turn into the queue (the test above then ran a client out
    of retries), so a TLS connection keeps the kernel's autotuning."""
    from test_http import server_sndbuf
    cert, key = make_cert(tmp_path)
    d = make_daemon(args=["--mode", "s3", "--s3-tls-cert", str(cert), "--s3-tls-key", str(key)],
                    env={"OPENLAKE_ACCESS_KEY": AK, "OPENLAKE_SECRET_KEY": SK}, start=False)
    d.ssl_context = ssl.create_default_context(cafile=str(cert))
    d.start()
    ctx = ssl.create_default_context(cafile=str(cert))
    with socket.create_connection(("127.0.0.1", d.port), timeout=10) as raw, \
            ctx.wrap_socket(raw, server_hostname="127.0.0.1") as s:
        s.sendall(b"GET /_openlake/health/live HTTP/1.1\r\nHost: x\r\n\r\n")
        assert s.recv(64).startswith(b"HTTP/1.1 200")
        assert server_sndbuf(d.port, s.getsockname()[1]) != 2 * 262144
