"""The S3 API with real clients (boto3) against a real openlaked.

Authentication first: every request must carry a valid SigV4 signature
(header or presigned URL) from one of the daemon's credentials, which are
configured, or generated on the first start and kept 0600 in the data dir.
"""
import datetime
import os
import re
import stat
import urllib.error
import urllib.request

import boto3
import botocore
import pytest
from botocore.auth import SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.config import Config
from botocore.credentials import Credentials

AK, SK = "OLTESTACCESSKEY00001", "olTestSecretKey/0123456789abcdefghijklmn"


def client(d, ak=AK, sk=SK, **cfg):
    return boto3.client("s3", endpoint_url=d.url, aws_access_key_id=ak,
                        aws_secret_access_key=sk, region_name="us-east-1",
                        config=Config(retries={"max_attempts": 1}, **cfg))


@pytest.fixture
def s3d(make_daemon):
    return make_daemon(args=["--mode", "s3"], env={"OPENLAKE_ACCESS_KEY": AK,
                                                   "OPENLAKE_SECRET_KEY": SK})


def error_of(fn):
    with pytest.raises(botocore.exceptions.ClientError) as e:
        fn()
    r = e.value.response
    return r["Error"]["Code"], r["ResponseMetadata"]["HTTPStatusCode"], r


def test_signed_requests_are_served_with_request_ids(s3d):
    c = client(s3d)
    ids = set()
    for _ in range(3):
        r = c.list_buckets()
        rid = r["ResponseMetadata"]["HTTPHeaders"]["x-amz-request-id"]
        assert re.fullmatch(r"[0-9A-F]{16}", rid)
        ids.add(rid)
    assert len(ids) == 3
    code, status, r = error_of(lambda: c.head_object(Bucket="nobucket", Key="k"))
    assert status == 404 and re.fullmatch(
        r"[0-9A-F]{16}", r["ResponseMetadata"]["HTTPHeaders"]["x-amz-request-id"])


def test_wrong_secret_and_unknown_key(s3d):
    assert error_of(lambda: client(s3d, sk="wrong").list_buckets())[:2] == \
        ("SignatureDoesNotMatch", 403)
    assert error_of(lambda: client(s3d, ak="NOSUCHKEY").list_buckets())[:2] == \
        ("InvalidAccessKeyId", 403)
    # A key with traversal-looking bytes is signed like any other: the
    # signature covers the path exactly as sent.
    c = client(s3d)
    code, _, _ = error_of(lambda: c.put_object(Bucket="bkt", Key="a/../b c+d%", Body=b"x"))
    assert code not in ("SignatureDoesNotMatch", "AccessDenied")


def signed(d, method, path, when, body=b"", headers=None):
    req = AWSRequest(method=method, url=d.url + path, data=body, headers=headers or {})
    req.headers["x-amz-content-sha256"] = "UNSIGNED-PAYLOAD"
    auth = SigV4Auth(Credentials(AK, SK), "s3", "us-east-1")
    auth._timestamp = lambda: when.strftime("%Y%m%dT%H%M%SZ")  # noqa: SLF001
    real = datetime.datetime

    class Frozen(datetime.datetime):
        @classmethod
        def utcnow(cls):
            return when.replace(tzinfo=None)

        @classmethod
        def now(cls, tz=None):
            return when if tz else when.replace(tzinfo=None)

    botocore.auth.datetime.datetime = Frozen
    try:
        auth.add_auth(req)
    finally:
        botocore.auth.datetime.datetime = real
    r = urllib.request.Request(d.url + path, data=body or None, method=method,
                               headers=dict(req.headers.items()))
    try:
        with urllib.request.urlopen(r, timeout=10) as resp:
            return resp.status, resp.read()
    except urllib.error.HTTPError as e:
        return e.code, e.read()


def test_clock_skew_over_15_minutes_is_refused(s3d):
    now = datetime.datetime.now(datetime.timezone.utc)
    status, body = signed(s3d, "GET", "/", now - datetime.timedelta(minutes=16))
    assert status == 403 and b"<Code>RequestTimeTooSkewed</Code>" in body, body
    status, body = signed(s3d, "GET", "/", now + datetime.timedelta(minutes=16))
    assert status == 403 and b"<Code>RequestTimeTooSkewed</Code>" in body, body
    status, body = signed(s3d, "GET", "/", now - datetime.timedelta(minutes=10))
    assert b"RequestTimeTooSkewed" not in body and b"SignatureDoesNotMatch" not in body, body


def test_presigned_urls(s3d):
    c = client(s3d, signature_version="s3v4")
    url = c.generate_presigned_url("get_object", Params={"Bucket": "bkt", "Key": "k y"},
                                   ExpiresIn=60)
    try:
        urllib.request.urlopen(url, timeout=10)
        status, body = 200, b""
    except urllib.error.HTTPError as e:
        status, body = e.code, e.read()
    assert b"SignatureDoesNotMatch" not in body and b"AccessDenied" not in body, body
    # tampered: another key under the same signature
    bad = url.replace("/k%20y?", "/k%20z?")
    with pytest.raises(urllib.error.HTTPError) as e:
        urllib.request.urlopen(bad, timeout=10)
    assert e.value.code == 403 and b"SignatureDoesNotMatch" in e.value.read()
    # expiry beyond 7 days is refused by the server too
    long = re.sub(r"X-Amz-Expires=\d+", "X-Amz-Expires=604801", url)
    with pytest.raises(urllib.error.HTTPError) as e:
        urllib.request.urlopen(long, timeout=10)
    assert e.value.code == 400 and b"AuthorizationQueryParametersError" in e.value.read()
    # Signature Version 2 (boto3's default for presigning) is served too
    # (test_s3_sigv2.py): here the request gets as far as the missing bucket
    v2 = client(s3d).generate_presigned_url("get_object", Params={"Bucket": "bkt", "Key": "k"})
    assert "AWSAccessKeyId=" in v2
    with pytest.raises(urllib.error.HTTPError) as e:
        urllib.request.urlopen(v2, timeout=10)
    body = e.value.read()
    assert e.value.code == 404 and b"<Code>NoSuchBucket</Code>" in body, body


def test_anonymous_requests_are_denied(s3d):
    with pytest.raises(urllib.error.HTTPError) as e:
        urllib.request.urlopen(s3d.url + "/bkt/key", timeout=10)
    assert e.value.code == 403 and b"<Code>AccessDenied</Code>" in e.value.read()


def test_credentials_generated_on_first_start(make_daemon):
    d = make_daemon(args=["--mode", "s3"])
    banner = d.proc.stdout.readline() + "".join(d.proc.stdout.readline() for _ in range(4))
    path = d.data / "s3.credentials"
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
    text = path.read_text()
    ak = re.search(r'access_key = "([A-Z0-9]{20})"', text).group(1)
    sk = re.search(r'secret_key = "([A-Za-z0-9+/]{40})"', text).group(1)
    assert ak in banner and sk in banner          # printed once, on creation
    assert client(d, ak, sk).list_buckets()["Buckets"] == []
    d.stop()
    d.start()
    banner2 = "".join(d.proc.stdout.readline() for _ in range(5))
    assert sk not in banner2 and "s3.credentials" in banner2
    assert path.read_text() == text                # the same pair after a restart
    assert client(d, ak, sk).list_buckets()["Buckets"] == []


# -- buckets and objects --------------------------------------------------------

import hashlib  # noqa: E402
import shutil  # noqa: E402
import signal as _signal  # noqa: E402


def test_bucket_lifecycle(s3d):
    c = client(s3d)
    assert c.list_buckets()["Buckets"] == []
    assert c.create_bucket(Bucket="alpha")["Location"] == "/alpha"
    c.create_bucket(Bucket="beta.two")
    # one's own bucket again: 200 in us-east-1, as AWS (test_s3_boto_compat.py)
    assert c.create_bucket(Bucket="alpha")["Location"] == "/alpha"
    assert [b["Name"] for b in c.list_buckets()["Buckets"]] == ["alpha", "beta.two"]
    assert c.head_bucket(Bucket="alpha")["ResponseMetadata"]["HTTPStatusCode"] == 200
    assert error_of(lambda: c.head_bucket(Bucket="nope"))[1] == 404
    assert c.get_bucket_location(Bucket="alpha")["LocationConstraint"] is None
    assert error_of(lambda: c.get_bucket_location(Bucket="nope"))[0] == "NoSuchBucket"
    for bad in ["ab", "Upper", "a..b", "192.168.1.1", "-dash", "x" * 64]:
        assert error_of(lambda: c.create_bucket(Bucket=bad))[0] in (
            "InvalidBucketName",), bad
    c.put_object(Bucket="alpha", Key="k", Body=b"v")
    assert error_of(lambda: c.delete_bucket(Bucket="alpha"))[:2] == ("BucketNotEmpty", 409)
    c.delete_object(Bucket="alpha", Key="k")
    c.delete_bucket(Bucket="alpha")
    assert error_of(lambda: c.delete_bucket(Bucket="alpha"))[:2] == ("NoSuchBucket", 404)
    listed = c.list_buckets()["Buckets"]
    assert [b["Name"] for b in listed] == ["beta.two"]
    now = datetime.datetime.now(datetime.timezone.utc)
    assert abs((listed[0]["CreationDate"] - now).total_seconds()) < 120
    # the list survives a restart (read back from the drives), dates too
    s3d.stop()
    s3d.start()
    again = client(s3d).list_buckets()["Buckets"]
    assert [b["Name"] for b in again] == ["beta.two"]
    assert abs((again[0]["CreationDate"] - listed[0]["CreationDate"]).total_seconds()) <= 2


def test_list_buckets_leaves_out_leftovers_on_few_drives(make_daemon, tmp_path):
    """A bucket directory on one drive of four (a create or delete cut
    short) is not a bucket; on half of them it is listed."""
    d, drives = multi_drive(make_daemon, tmp_path)
    client(d).create_bucket(Bucket="real")
    d.stop()
    (drives[0] / ".openlake" / "buckets" / "leftover").mkdir()
    for dr in drives[:2]:
        (dr / ".openlake" / "buckets" / "half").mkdir()
    d.start()
    assert [b["Name"] for b in client(d).list_buckets()["Buckets"]] == ["half", "real"]


SIZES = [0, 1, 1000, 128 << 10, (128 << 10) + 1, 1 << 20, (1 << 20) + 1, 5 * (1 << 20) + 17]


@pytest.mark.parametrize("checksums", ["when_supported", "when_required"])
def test_put_get_round_trip(s3d, checksums):
    """boto3 as it comes (aws-chunked bodies with a CRC32 trailer) and with
    checksums only when required (a plain signed body)."""
    c = client(s3d, request_checksum_calculation=checksums)
    c.create_bucket(Bucket="data")
    for n in SIZES:
        body = os.urandom(n)
        r = c.put_object(Bucket="data", Key=f"obj/{n}", Body=body)
        assert r["ETag"] == '"%s"' % hashlib.md5(body).hexdigest()
        g = c.get_object(Bucket="data", Key=f"obj/{n}")
        assert g["Body"].read() == body, n
        assert g["ContentLength"] == n and g["ETag"] == r["ETag"]
        assert c.head_object(Bucket="data", Key=f"obj/{n}")["ContentLength"] == n
    # overwrite
    c.put_object(Bucket="data", Key="obj/1", Body=b"new")
    assert c.get_object(Bucket="data", Key="obj/1")["Body"].read() == b"new"


def test_concurrent_uploads_get_their_own_etags(s3d):
    """Many uploads at once on one core: their MD5s are hashed side by side
    in shared lanes (base/md5.h); each ETag must still be its own body's,
    whatever the sizes and however the bodies interleave, also for parts."""
    import concurrent.futures
    import random
    c = client(s3d, request_checksum_calculation="when_required",
               max_pool_connections=32)
    c.create_bucket(Bucket="many")
    rnd = random.Random(5)
    sizes = [rnd.choice([0, 1, 63, 64, 65, 4096, 100_000, 700_000, 1 << 20, 3_000_001])
             for _ in range(96)]

    def one(i):
        body = os.urandom(sizes[i])
        r = c.put_object(Bucket="many", Key=f"k{i}", Body=body)
        return r["ETag"] == '"%s"' % hashlib.md5(body).hexdigest()

    with concurrent.futures.ThreadPoolExecutor(24) as ex:
        assert all(ex.map(one, range(len(sizes))))
    up = c.create_multipart_upload(Bucket="many", Key="mp")["UploadId"]
    bodies = [os.urandom(5 << 20) for _ in range(6)]

    def part(i):
        r = c.upload_part(Bucket="many", Key="mp", UploadId=up, PartNumber=i + 1,
                          Body=bodies[i])
        return r["ETag"] == '"%s"' % hashlib.md5(bodies[i]).hexdigest()

    with concurrent.futures.ThreadPoolExecutor(6) as ex:
        assert all(ex.map(part, range(6)))
    c.abort_multipart_upload(Bucket="many", Key="mp", UploadId=up)


def test_etag_wait_for_company_is_bounded(make_daemon):
    """A body that ends with MD5 blocks staged waits for another upload's
    bytes to hash them with (s3/server.c, base/md5.h). Here the other upload
    stalls mid-body: the wait ends at the loop's next tick, the PUT answers
    at once with the right ETag, and the stalled one still fails cleanly
    when its client goes away."""
    import socket
    import time
    import urllib.parse
    d = make_daemon(args=["--mode", "s3", "--threads", "1"],
                    env={"OPENLAKE_ACCESS_KEY": AK, "OPENLAKE_SECRET_KEY": SK})
    c = client(d, request_checksum_calculation="when_required")
    c.create_bucket(Bucket="wait")
    url = urllib.parse.urlsplit(client(d, signature_version="s3v4").generate_presigned_url(
        "put_object", Params={"Bucket": "wait", "Key": "stalled"}, ExpiresIn=600))

    def received():
        with urllib.request.urlopen(d.url + "/_openlake/metrics", timeout=10) as r:
            return sum(float(ln.split()[-1]) for ln in r.read().decode().splitlines()
                       if ln.startswith("openlake_http_received_bytes_total"))

    base = received()
    stalled = socket.create_connection((url.hostname, url.port))
    head = (f"PUT {url.path}?{url.query} HTTP/1.1\r\nHost: {url.netloc}\r\n"
            f"Content-Length: {4 << 20}\r\n\r\n").encode()
    stalled.sendall(head + os.urandom(300_000))
    # Its headers and first bytes are in (an upload still receiving) once the
    # server has read more than the head (the polls' own requests are small).
    deadline = time.monotonic() + 60
    while received() - base < len(head) + 100_000:
        assert time.monotonic() < deadline, "the stalled upload's bytes never arrived"
        time.sleep(0.02)

    def etag_metrics():
        with urllib.request.urlopen(d.url + "/_openlake/metrics", timeout=10) as r:
            return {k: int(v) for k, v in (ln.split() for ln in r.read().decode().splitlines()
                                           if ln.startswith("openlake_s3_etag_"))}

    before = etag_metrics()
    for i in range(3):
        body = os.urandom((1 << 20) + 12345)
        t0 = time.monotonic()
        r = c.put_object(Bucket="wait", Key=f"k{i}", Body=body)
        took = time.monotonic() - t0
        assert r["ETag"] == '"%s"' % hashlib.md5(body).hexdigest()
        assert took < 30, took   # not held until the stalled upload moves (it never does)
    after = etag_metrics()
    assert after["openlake_s3_etag_waits_total"] - before["openlake_s3_etag_waits_total"] == 3
    assert after["openlake_s3_etag_waits_late_total"] - \
        before["openlake_s3_etag_waits_late_total"] == 3
    assert after["openlake_s3_etag_md5_blocks_alone_total"] > \
        before["openlake_s3_etag_md5_blocks_alone_total"]
    stalled.close()
    # the stalled upload stored nothing; the daemon serves on
    time.sleep(0.3)
    assert error_of(lambda: c.head_object(Bucket="wait", Key="stalled"))[1] == 404
    assert c.get_object(Bucket="wait", Key="k2")["ContentLength"] == (1 << 20) + 12345


def test_large_gets_to_slow_fast_and_vanishing_readers(s3d):
    """Plain-HTTP GET bodies leave from the engine's stripe memory without a
    copy (ol_http_resp_write_ref); a slice must stay intact until the socket
    took all of it, whatever the reader does: a slow reader with a small
    receive buffer, readers side by side, readers that vanish mid-body."""
    import concurrent.futures
    import socket
    import time
    import urllib.parse
    c = client(s3d, max_pool_connections=16)
    c.create_bucket(Bucket="big")
    body = os.urandom(24 << 20)
    want = hashlib.sha256(body).hexdigest()
    c.put_object(Bucket="big", Key="b", Body=body)
    url = urllib.parse.urlsplit(client(s3d, signature_version="s3v4").generate_presigned_url(
        "get_object", Params={"Bucket": "big", "Key": "b"}, ExpiresIn=600))
    target = url.path + "?" + url.query

    def raw_get(rcvbuf=None, stop_after=None, pause=0.0):
        s = socket.socket()
        if rcvbuf:
            s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)
        s.connect((url.hostname, url.port))
        s.sendall(f"GET {target} HTTP/1.1\r\nHost: {url.netloc}\r\n\r\n".encode())
        buf = b""
        while b"\r\n\r\n" not in buf:
            buf += s.recv(65536)
        head, got = buf.split(b"\r\n\r\n", 1)
        assert head.startswith(b"HTTP/1.1 200"), head
        h = hashlib.sha256(got)
        n = len(got)
        while n < len(body):
            if stop_after is not None and n >= stop_after:
                s.close()   # gone mid-body
                return None
            d = s.recv(16384)
            assert d, f"closed after {n} bytes"
            h.update(d)
            n += len(d)
            if pause:
                time.sleep(pause)
        s.close()
        return h.hexdigest()

    assert raw_get(rcvbuf=4096, pause=0.0005) == want            # slow reader
    for stop in (1, 3 << 20, 9 << 20):                            # vanishing readers
        assert raw_get(stop_after=stop) is None

    def full(_):
        return hashlib.sha256(c.get_object(Bucket="big", Key="b")["Body"].read()).hexdigest()

    with concurrent.futures.ThreadPoolExecutor(8) as ex:         # side by side
        assert set(ex.map(full, range(8))) == {want}
    r = c.get_object(Bucket="big", Key="b", Range="bytes=5000000-17000000")
    assert r["Body"].read() == body[5000000:17000001]


def test_metadata_headers_and_ranges(s3d):
    c = client(s3d)
    c.create_bucket(Bucket="meta")
    body = bytes(range(256)) * 8192          # 2 MiB: two stripes
    c.put_object(Bucket="meta", Key="a/../b c+d%", Body=body, ContentType="text/x-test",
                 Metadata={"Owner": "me", "n": "1"}, CacheControl="no-cache",
                 ContentDisposition='attachment; filename="x"')
    h = c.head_object(Bucket="meta", Key="a/../b c+d%")
    assert h["ContentType"] == "text/x-test"
    assert h["Metadata"] == {"owner": "me", "n": "1"}
    assert h["CacheControl"] == "no-cache"
    assert h["ContentDisposition"] == 'attachment; filename="x"'
    for rng, lo, hi in [("bytes=0-0", 0, 0), ("bytes=1048570-1048600", 1048570, 1048600),
                        ("bytes=-10", len(body) - 10, len(body) - 1),
                        ("bytes=2097100-", 2097100, len(body) - 1),
                        ("bytes=5-99999999", 5, len(body) - 1)]:
        g = c.get_object(Bucket="meta", Key="a/../b c+d%", Range=rng)
        assert g["ContentRange"] == f"bytes {lo}-{hi}/{len(body)}", rng
        assert g["Body"].read() == body[lo:hi + 1], rng
    assert error_of(lambda: c.get_object(Bucket="meta", Key="a/../b c+d%",
                                         Range=f"bytes={len(body)}-"))[:2] == \
        ("InvalidRange", 416)
    # response-* overrides on GET
    g = c.get_object(Bucket="meta", Key="a/../b c+d%", ResponseContentType="image/png")
    assert g["ContentType"] == "image/png"


def test_conditional_reads(s3d):
    c = client(s3d)
    c.create_bucket(Bucket="cond")
    etag = c.put_object(Bucket="cond", Key="k", Body=b"abc")["ETag"]
    assert c.get_object(Bucket="cond", Key="k", IfMatch=etag)["Body"].read() == b"abc"
    assert error_of(lambda: c.get_object(Bucket="cond", Key="k", IfMatch='"nope"'))[:2] == \
        ("PreconditionFailed", 412)
    assert error_of(lambda: c.get_object(Bucket="cond", Key="k", IfNoneMatch=etag))[1] == 304
    future = datetime.datetime.now(datetime.timezone.utc) + datetime.timedelta(hours=1)
    past = datetime.datetime(2000, 1, 1, tzinfo=datetime.timezone.utc)
    assert error_of(lambda: c.get_object(Bucket="cond", Key="k", IfModifiedSince=future))[1] \
        == 304
    assert c.get_object(Bucket="cond", Key="k", IfModifiedSince=past)["Body"].read() == b"abc"
    assert error_of(lambda: c.get_object(Bucket="cond", Key="k", IfUnmodifiedSince=past))[1] \
        == 412


def test_conditional_copies(s3d):
    # the x-amz-copy-source-if-* conditions: every failed one is 412, never 304
    c = client(s3d)
    c.create_bucket(Bucket="ccond")
    etag = c.put_object(Bucket="ccond", Key="src", Body=b"abc")["ETag"]
    future = datetime.datetime.now(datetime.timezone.utc) + datetime.timedelta(hours=1)
    past = datetime.datetime(2000, 1, 1, tzinfo=datetime.timezone.utc)
    src = {"Bucket": "ccond", "Key": "src"}
    passing = [{"CopySourceIfMatch": etag}, {"CopySourceIfNoneMatch": '"nope"'},
               {"CopySourceIfModifiedSince": past}, {"CopySourceIfUnmodifiedSince": future},
               # an If-*-Since gives way to its ETag twin
               {"CopySourceIfMatch": etag, "CopySourceIfUnmodifiedSince": past},
               {"CopySourceIfNoneMatch": '"nope"', "CopySourceIfModifiedSince": future}]
    failing = [{"CopySourceIfMatch": '"nope"'}, {"CopySourceIfNoneMatch": etag},
               {"CopySourceIfModifiedSince": future}, {"CopySourceIfUnmodifiedSince": past}]
    for i, cond in enumerate(passing):
        c.copy_object(Bucket="ccond", Key=f"ok{i}", CopySource=src, **cond)
        assert c.get_object(Bucket="ccond", Key=f"ok{i}")["Body"].read() == b"abc", cond
    for cond in failing:
        assert error_of(lambda: c.copy_object(Bucket="ccond", Key="no", CopySource=src,
                                              **cond))[:2] == ("PreconditionFailed", 412), cond
    assert error_of(lambda: c.head_object(Bucket="ccond", Key="no"))[1] == 404

def test_bad_bodies_store_nothing(s3d):
    c = client(s3d)
    c.create_bucket(Bucket="bad")
    assert error_of(lambda: c.put_object(Bucket="bad", Key="md5", Body=b"abc",
                                         ContentMD5="AAAAAAAAAAAAAAAAAAAAAA=="))[:2] == \
        ("BadDigest", 400)
    assert error_of(lambda: c.put_object(Bucket="bad", Key="crc", Body=b"abc",
                                         ChecksumCRC32="AAAAAA=="))[:2] == ("BadDigest", 400)
    # x-amz-content-sha256 that does not match the body
    now = datetime.datetime.now(datetime.timezone.utc)
    req = AWSRequest(method="PUT", url=s3d.url + "/bad/sha", data=b"payload")
    req.headers["x-amz-content-sha256"] = hashlib.sha256(b"other").hexdigest()
    SigV4Auth(Credentials(AK, SK), "s3", "us-east-1").add_auth(req)
    r = urllib.request.Request(s3d.url + "/bad/sha", data=b"payload", method="PUT",
                               headers=dict(req.headers.items()))
    with pytest.raises(urllib.error.HTTPError) as e:
        urllib.request.urlopen(r, timeout=10)
    assert e.value.code == 400 and b"XAmzContentSHA256Mismatch" in e.value.read()
    del now
    for key in ["md5", "crc", "sha"]:
        assert error_of(lambda: c.head_object(Bucket="bad", Key=key))[1] == 404, key
    assert error_of(lambda: c.put_object(Bucket="missing", Key="k", Body=b"x"))[:2] == \
        ("NoSuchBucket", 404)
    big = "x" * 2100
    assert error_of(lambda: c.put_object(Bucket="bad", Key="m", Body=b"x",
                                         Metadata={"a": big}))[0] == "MetadataTooLarge"
    assert error_of(lambda: c.put_object(Bucket="bad", Key="k" * 1025, Body=b"x"))[0] == \
        "KeyTooLongError"


def test_presigned_put_and_get(s3d):
    c = client(s3d, signature_version="s3v4")
    c.create_bucket(Bucket="pre")
    put = c.generate_presigned_url("put_object", Params={"Bucket": "pre", "Key": "p k"},
                                   ExpiresIn=300)
    r = urllib.request.Request(put, data=b"presigned body", method="PUT")
    with urllib.request.urlopen(r, timeout=10) as resp:
        assert resp.status == 200
    get = c.generate_presigned_url("get_object", Params={"Bucket": "pre", "Key": "p k"},
                                   ExpiresIn=300)
    with urllib.request.urlopen(get, timeout=10) as resp:
        assert resp.read() == b"presigned body"


def streaming_put(d, path, data, chunk, corrupt_chunk=None):
    """A STREAMING-AWS4-HMAC-SHA256-PAYLOAD upload as minio-go and the AWS
    SDKs for Java send it over HTTP: the head signed by botocore's signer,
    every chunk signed after it (the chain of the SigV4 streaming spec).
    corrupt_chunk: flip a byte of that chunk after signing. Returns the
    connection, its request head sent, and a generator of the body's
    pieces (send them, then finish())."""
    import hmac
    sizes = [len(data[i:i + chunk]) for i in range(0, len(data), chunk)] + [0]
    framing = sum(len("%x;chunk-signature=" % n) + 64 + 2 + n + (2 if n else 0)
                  for n in sizes) + 2
    req = AWSRequest(method="PUT", url=d.url + path, headers={
        "x-amz-content-sha256": "STREAMING-AWS4-HMAC-SHA256-PAYLOAD",
        "content-encoding": "aws-chunked",
        "x-amz-decoded-content-length": str(len(data)),
        "content-length": str(framing)})
    SigV4Auth(Credentials(AK, SK), "s3", "us-east-1").add_auth(req)
    amz_date = req.headers["X-Amz-Date"]
    seed = req.headers["Authorization"].rsplit("Signature=", 1)[1]
    scope = "%s/us-east-1/s3/aws4_request" % amz_date[:8]
    key = ("AWS4" + SK).encode()
    for part in (amz_date[:8], "us-east-1", "s3", "aws4_request"):
        key = hmac.new(key, part.encode(), hashlib.sha256).digest()
    empty = hashlib.sha256(b"").hexdigest()

    def body():
        prev, off = seed, 0
        for i, n in enumerate(sizes):
            piece = data[off:off + n]
            off += n
            sts = "\n".join(["AWS4-HMAC-SHA256-PAYLOAD", amz_date, scope, prev, empty,
                             hashlib.sha256(piece).hexdigest()])
            prev = hmac.new(key, sts.encode(), hashlib.sha256).hexdigest()
            if i == corrupt_chunk:
                piece = piece[:n // 2] + bytes([piece[n // 2] ^ 1]) + piece[n // 2 + 1:]
            yield ("%x;chunk-signature=%s\r\n" % (n, prev)).encode() + piece + \
                (b"\r\n" if n else b"")
        yield b"\r\n"

    import http.client
    conn = http.client.HTTPConnection("127.0.0.1", d.port, timeout=20)
    conn.putrequest("PUT", path, skip_accept_encoding=True)
    for k, v in req.headers.items():
        conn.putheader(k, v)
    conn.endheaders()
    return conn, body()


def chunk_metrics(d):
    with urllib.request.urlopen(d.url + "/_openlake/metrics", timeout=10) as r:
        return {k: int(v) for k, v in (ln.split() for ln in r.read().decode().splitlines()
                                       if ln.startswith("openlake_s3_chunk_"))}


def cpu_has_sha_ni():
    with open("/proc/cpuinfo") as f:
        return " sha_ni" in f.read()


def finish(conn, pieces):
    for p in pieces:
        conn.send(p)
    r = conn.getresponse()
    out = r.status, r.read()
    conn.close()
    return out


@pytest.mark.parametrize("company", [False, True])
@pytest.mark.parametrize("chunk", [65536, 131072, 300000, 1000])
def test_signed_streaming_uploads(s3d, chunk, company):
    """Signed chunks of the sizes clients use, chunks longer than the stage
    and small ones, from an upload alone on the core (its chunks' SHA-256s
    and its MD5 in one pass, base/md5sha.h) or while another upload is
    receiving (chunks hashed two at a time, every other one staged); a
    byte changed in any chunk is SignatureDoesNotMatch and stores
    nothing."""
    c = client(s3d)
    c.create_bucket(Bucket="sig")
    data = os.urandom(5 * chunk + 12345)
    other = None
    if company:   # it starts alone (one pass); the uploads below then are not
        other_data = os.urandom(3 * 65536)
        conn, pieces = streaming_put(s3d, "/sig/company", other_data, 65536)
        conn.send(next(pieces))
        other = (conn, pieces)
    r = finish(*streaming_put(s3d, "/sig/ok", data, chunk))
    assert r[0] == 200, r
    m = chunk_metrics(s3d)
    paired = m["openlake_s3_chunk_sha256_paired_bytes_total"]
    one_pass = m["openlake_s3_chunk_one_pass_bytes_total"]
    if not cpu_has_sha_ni():
        assert paired == 0 and one_pass == 0, m
    elif company:
        assert one_pass == 0, m   # the company's body has not ended
        if chunk <= 131072:       # chunks 1+2, 3+4 side by side
            assert paired >= 2 * (chunk // 64 * 64), paired
    else:
        assert paired == 0, m
        # every chunk when they are whole blocks; else the MD5 and the next
        # chunk's SHA-256 no longer stand at one offset in a block after the
        # first chunk, and each hashes alone
        assert one_pass >= (5 * chunk if chunk % 64 == 0 else chunk // 64 * 64), m
    got = c.get_object(Bucket="sig", Key="ok")
    assert got["Body"].read() == data
    assert got["ETag"] == '"%s"' % hashlib.md5(data).hexdigest()
    for bad in (0, 1, 2, 5):   # the first, a paired one, a staged one, the last
        status, body = finish(*streaming_put(s3d, "/sig/bad%d" % bad, data, chunk, bad))
        assert status == 403 and b"SignatureDoesNotMatch" in body, bad
        assert error_of(lambda: c.head_object(Bucket="sig", Key="bad%d" % bad))[1] == 404
    if other:
        assert finish(*other)[0] == 200
        got = c.get_object(Bucket="sig", Key="company")
        assert got["Body"].read() == other_data
        assert got["ETag"] == '"%s"' % hashlib.md5(other_data).hexdigest()


def signed_payload_put(d, path, data, sha=None):
    """A PUT with a signed payload (x-amz-content-sha256 = the body's SHA-256,
    the AWS SDKs' default over plain HTTP), its head sent: returns the
    connection (send the body, then read the response)."""
    import http.client
    req = AWSRequest(method="PUT", url=d.url + path, headers={
        "x-amz-content-sha256": sha or hashlib.sha256(data).hexdigest(),
        "content-length": str(len(data))})
    SigV4Auth(Credentials(AK, SK), "s3", "us-east-1").add_auth(req)
    conn = http.client.HTTPConnection("127.0.0.1", d.port, timeout=20)
    conn.putrequest("PUT", path, skip_accept_encoding=True)
    for k, v in req.headers.items():
        conn.putheader(k, v)
    conn.endheaders()
    return conn


@pytest.mark.parametrize("corrupt", [False, True])
def test_signed_payload_moves_from_one_pass_to_the_set(s3d, corrupt):
    """A signed-payload upload alone on its core hashes its MD5 and its
    SHA-256 in one pass (base/md5sha.h); when a second one starts receiving,
    the first moves to a lane of the core's MD5 set at its next block edge
    (s3/body.h) and both hash side by side there. Both are stored right;
    a byte changed after the move is XAmzContentSHA256Mismatch and stores
    nothing."""
    import time
    c = client(s3d)
    c.create_bucket(Bucket="mvb")

    def received():
        with urllib.request.urlopen(s3d.url + "/_openlake/metrics", timeout=10) as r:
            return sum(float(ln.split()[-1]) for ln in r.read().decode().splitlines()
                       if ln.startswith("openlake_http_received_bytes_total"))

    def wait_received(n):
        deadline = time.monotonic() + 60
        while received() < n:
            assert time.monotonic() < deadline, "the server never read the bytes sent"
            time.sleep(0.02)

    def moved():
        with urllib.request.urlopen(s3d.url + "/_openlake/metrics", timeout=10) as r:
            return int(next(ln.split()[-1] for ln in r.read().decode().splitlines()
                            if ln.startswith("openlake_s3_one_pass_moved_total")))

    a, b = os.urandom((3 << 20) + 1001), os.urandom((2 << 20) + 77)
    sent_a = a if not corrupt else a[:(2 << 20) + 5] + bytes([a[(2 << 20) + 5] ^ 1]) + \
        a[(2 << 20) + 6:]
    before, base = moved(), received()
    ca = signed_payload_put(s3d, "/mvb/a", a)
    ca.send(sent_a[:(1 << 20) + 333])   # alone: one pass
    wait_received(base + (1 << 20))
    cb = signed_payload_put(s3d, "/mvb/b", b)
    cb.send(b[:1 << 20])                # company, receiving: a lane of the set
    wait_received(base + (2 << 20))
    ca.send(sent_a[(1 << 20) + 333:])   # a moves to the set
    ra = ca.getresponse()
    body_a = ra.read()
    cb.send(b[1 << 20:])
    rb = cb.getresponse()
    assert rb.status == 200, rb.read()
    rb.read()
    if corrupt:
        assert ra.status == 400 and b"XAmzContentSHA256Mismatch" in body_a, body_a
        assert error_of(lambda: c.head_object(Bucket="mvb", Key="a"))[1] == 404
    else:
        assert ra.status == 200, body_a
        got = c.get_object(Bucket="mvb", Key="a")
        assert got["Body"].read() == a
        assert got["ETag"] == '"%s"' % hashlib.md5(a).hexdigest()
    got = c.get_object(Bucket="mvb", Key="b")
    assert got["Body"].read() == b
    assert got["ETag"] == '"%s"' % hashlib.md5(b).hexdigest()
    assert moved() - before == (1 if cpu_has_sha_ni() else 0)
    ca.close()
    cb.close()


def test_signed_streaming_uploads_past_the_staging_pool(s3d):
    """More signed uploads in flight at once than a core lends staging to
    (OL_S3_CHUNK_STAGES, 32; the daemon runs one core, which takes 64
    PUTs at once): the first, alone when it starts, hashes in one pass and
    takes none (where the CPU has the SHA extensions), 32 take one, the
    rest hash their chunks one by one, and every upload is stored right."""
    c = client(s3d)
    c.create_bucket(Bucket="many")
    ups = []
    for i in range(48):
        data = os.urandom(3 * 65536 + i)
        conn, pieces = streaming_put(s3d, "/many/k%d" % i, data, 65536)
        conn.send(next(pieces))   # each holds its staging from the first chunk on
        ups.append((data, conn, pieces))
    for i, (data, conn, pieces) in enumerate(ups):
        assert finish(conn, pieces)[0] == 200, i
    assert chunk_metrics(s3d)["openlake_s3_chunk_unstaged_total"] == \
        48 - 32 - (1 if cpu_has_sha_ni() else 0)
    for i, (data, _, _) in enumerate(ups):
        assert c.get_object(Bucket="many", Key="k%d" % i)["Body"].read() == data, i


def shard_files(root):
    """The objects' shard files under root: <data dir>/part.N of multipart
    objects, <data dir id>.data beside meta for the others (docs/store.md)."""
    return sorted(p for p in root.rglob("*") if p.is_file() and
                  (p.name.startswith("part.") or p.name.endswith(".data")))


def multi_drive(make_daemon, tmp_path, n=4):
    drives = [tmp_path / f"drive{i}" for i in range(n)]
    for dr in drives:
        dr.mkdir()
    d = make_daemon(args=["--mode", "s3", "--data-dirs", ",".join(map(str, drives))],
                    env={"OPENLAKE_ACCESS_KEY": AK, "OPENLAKE_SECRET_KEY": SK})
    return d, drives


def test_full_drives_answer_storage_full(make_daemon, tmp_path):
    """Drives without room for an object's shard files: the PUT is refused
    with XOpenLakeStorageFull (507, a message that says what to do) before
    its body is stored, nothing of it stays, and what fits is stored."""
    fs = tmp_path / "fs"
    fs.mkdir()
    if subprocess.run(["mount", "-t", "tmpfs", "-o", "size=8m", "tmpfs", str(fs)]).returncode:
        pytest.skip("cannot mount a tmpfs here (not root)")
    try:
        d, _ = multi_drive(make_daemon, fs)
        c = client(d)
        c.create_bucket(Bucket="full")
        code, status, r = error_of(lambda: c.put_object(Bucket="full", Key="big",
                                                        Body=b"x" * (40 << 20)))
        assert (code, status) == ("XOpenLakeStorageFull", 507)
        assert "Free space" in r["Error"]["Message"]
        assert error_of(lambda: c.head_object(Bucket="full", Key="big"))[1] == 404
        c.put_object(Bucket="full", Key="fits", Body=b"y" * (1 << 20))
        assert c.get_object(Bucket="full", Key="fits")["Body"].read() == b"y" * (1 << 20)
        d.stop()
    finally:
        subprocess.run(["umount", "-l", str(fs)])


@pytest.mark.parametrize("direct", ["true", "false"])
def test_direct_io_shard_writes(make_daemon, tmp_path, direct):
    """Shard files are written with O_DIRECT where the drives take it (this
    filesystem does) and buffered with direct_io = false: either way a PUT
    of several stripes, a multipart upload and a one-stripe object read
    back byte for byte, and /metrics counts the direct bytes."""
    import urllib.request
    drives = [tmp_path / f"drive{i}" for i in range(4)]
    for dr in drives:
        dr.mkdir()
    d = make_daemon(args=["--mode", "s3", "--data-dirs", ",".join(map(str, drives)),
                          "--direct-io", direct],
                    env={"OPENLAKE_ACCESS_KEY": AK, "OPENLAKE_SECRET_KEY": SK})
    c = client(d)
    c.create_bucket(Bucket="dio")
    bodies = {"big": os.urandom(5_000_003), "one": os.urandom((1 << 20) - 5)}
    for k, b in bodies.items():
        c.put_object(Bucket="dio", Key=k, Body=b)
    up = c.create_multipart_upload(Bucket="dio", Key="mp")["UploadId"]
    parts = [os.urandom(5 << 20), os.urandom(3_333_333)]
    etags = [c.upload_part(Bucket="dio", Key="mp", UploadId=up, PartNumber=i + 1,
                           Body=p)["ETag"] for i, p in enumerate(parts)]
    c.complete_multipart_upload(Bucket="dio", Key="mp", UploadId=up, MultipartUpload={
        "Parts": [{"PartNumber": i + 1, "ETag": e} for i, e in enumerate(etags)]})
    bodies["mp"] = b"".join(parts)
    for k, b in bodies.items():
        got = c.get_object(Bucket="dio", Key=k)["Body"].read()
        assert got == b, k
    with urllib.request.urlopen(d.url + "/_openlake/metrics", timeout=10) as r:
        m = {k: int(v) for k, v in (ln.split() for ln in r.read().decode().splitlines()
                                   if ln.startswith("openlake_store_direct_write_bytes_total"))}
    n = m["openlake_store_direct_write_bytes_total"]
    if direct == "true":
        # two of four shards are data: each drive writes about half of every byte
        assert n > 2 * sum(len(b) for b in bodies.values()) * 9 // 10, n
    else:
        assert n == 0


@pytest.mark.parametrize("sync", ["syncfs", "fsync"])
def test_store_sync_modes(make_daemon, tmp_path, sync):
    """Both ways of making writes durable (store_sync) serve the same S3:
    PUTs, an overwrite, a DELETE and a multipart upload read back after a
    restart. With the default syncfs group commit /metrics shows the
    barriers the syncfs calls answered: the four drives share tmp_path's
    filesystem, so a PUT sends one barrier per round for all four (two
    rounds, one with the ordered commit on XFS), not one per drive; with
    fsync there are none."""
    drives = [tmp_path / f"drive{i}" for i in range(4)]
    for dr in drives:
        dr.mkdir()
    args = ["--mode", "s3", "--data-dirs", ",".join(map(str, drives)), "--store-sync", sync]
    env = {"OPENLAKE_ACCESS_KEY": AK, "OPENLAKE_SECRET_KEY": SK}
    d = make_daemon(args=args, env=env)
    c = client(d)
    c.create_bucket(Bucket="syncb")
    bodies = {f"k{i}": os.urandom(n) for i, n in enumerate([10, 200_000, 3_000_001])}

    def sync_metrics():
        with urllib.request.urlopen(d.url + "/_openlake/metrics", timeout=10) as r:
            return {k: int(v) for k, v in (ln.split() for ln in r.read().decode().splitlines()
                                           if ln.startswith(("openlake_store_syncfs",
                                                             "openlake_store_sync_barriers")))}
    m0 = sync_metrics()
    c.put_object(Bucket="syncb", Key="first", Body=bodies["k1"])
    m1 = sync_metrics()
    db = m1["openlake_store_sync_barriers_total"] - m0["openlake_store_sync_barriers_total"]
    ds = m1["openlake_store_syncfs_total"] - m0["openlake_store_syncfs_total"]
    if sync == "syncfs":
        assert 1 <= db <= 2 and ds == db, (m0, m1)   # per round, not per drive (4 or 8)
    else:
        assert db == ds == 0, (m0, m1)
    bodies["first"] = bodies["k1"]
    for k, b in bodies.items():
        c.put_object(Bucket="syncb", Key=k, Body=b)
    bodies["k0"] = b"again"
    c.put_object(Bucket="syncb", Key="k0", Body=bodies["k0"])
    c.put_object(Bucket="syncb", Key="gone", Body=b"x")
    c.delete_object(Bucket="syncb", Key="gone")
    up = c.create_multipart_upload(Bucket="syncb", Key="mp")["UploadId"]
    part = os.urandom(5 << 20)
    e = c.upload_part(Bucket="syncb", Key="mp", UploadId=up, PartNumber=1, Body=part)["ETag"]
    c.complete_multipart_upload(Bucket="syncb", Key="mp", UploadId=up, MultipartUpload={
        "Parts": [{"PartNumber": 1, "ETag": e}]})
    bodies["mp"] = part
    m = sync_metrics()
    if sync == "syncfs":
        puts = len(bodies) + 2
        assert m["openlake_store_sync_barriers_total"] >= puts, m
        assert 1 <= m["openlake_store_syncfs_total"] <= m["openlake_store_sync_barriers_total"], m
    else:
        assert m == {"openlake_store_syncfs_total": 0, "openlake_store_sync_barriers_total": 0,
                     "openlake_store_syncfs_microseconds_total": 0}, m
    d.stop()
    d = make_daemon(args=args, env=env)
    c = client(d)
    for k, b in bodies.items():
        assert c.get_object(Bucket="syncb", Key=k)["Body"].read() == b, k
    with pytest.raises(botocore.exceptions.ClientError) as ei:
        c.head_object(Bucket="syncb", Key="gone")
    assert ei.value.response["Error"]["Code"] == "404"


def test_reads_survive_lost_drives(make_daemon, tmp_path):
    """4 drives, one erasure set, 2 parity: any 2 drives may be lost."""
    d, drives = multi_drive(make_daemon, tmp_path)
    c = client(d)
    c.create_bucket(Bucket="ecb")
    bodies = {n: os.urandom(n) for n in [10, 300_000, 3 * (1 << 20) + 5]}
    for n, b in bodies.items():
        c.put_object(Bucket="ecb", Key=f"o{n}", Body=b)
    d.stop()
    for dr in drives[1:3]:               # two drives wiped
        shutil.rmtree(dr / ".openlake" / "buckets")
    d.start()
    for n, b in bodies.items():
        assert client(d).get_object(Bucket="ecb", Key=f"o{n}")["Body"].read() == b, n


def test_flipped_shard_bytes_are_never_served(make_daemon, tmp_path):
    d, drives = multi_drive(make_daemon, tmp_path)
    c = client(d)
    c.create_bucket(Bucket="rot")
    body = os.urandom(2 * (1 << 20) + 100)
    c.put_object(Bucket="rot", Key="k", Body=body)
    flipped = 0
    for dr in drives:
        for part in shard_files(dr / ".openlake" / "buckets" / "rot"):
            with open(part, "r+b") as f:
                f.seek(100)
                x = f.read(1)
                f.seek(100)
                f.write(bytes([x[0] ^ 0xFF]))
            flipped += 1
            break                         # one shard per drive at most 2 drives
        if flipped == 2:
            break
    assert flipped == 2
    assert c.get_object(Bucket="rot", Key="k")["Body"].read() == body


def test_acknowledged_puts_survive_kill_9(make_daemon, tmp_path):
    d, _ = multi_drive(make_daemon, tmp_path)
    c = client(d)
    c.create_bucket(Bucket="dur")
    bodies = {f"k{i}": os.urandom(1000 * i + 1) for i in range(20)}
    for k, b in bodies.items():
        c.put_object(Bucket="dur", Key=k, Body=b)
    d.signal(_signal.SIGKILL)
    d.proc.wait()
    d.stop(expect_rc=None)
    d.start()
    c = client(d)
    for k, b in bodies.items():
        assert c.get_object(Bucket="dur", Key=k)["Body"].read() == b, k


# -- listings -------------------------------------------------------------------

def all_keys(c, bucket, **kw):
    keys, prefixes = [], []
    for page in c.get_paginator("list_objects_v2").paginate(Bucket=bucket, **kw):
        keys += [o["Key"] for o in page.get("Contents", [])]
        prefixes += [p["Prefix"] for p in page.get("CommonPrefixes", [])]
    return keys, prefixes


def test_list_objects_v2_and_v1(s3d):
    c = client(s3d)
    c.create_bucket(Bucket="lst")
    names = sorted([f"dir{i}/file{j}" for i in range(3) for j in range(4)] +
                   ["top", "top2", "a b/€ x", "z%25"])
    for k in names:
        c.put_object(Bucket="lst", Key=k, Body=k.encode())
    assert all_keys(c, "lst")[0] == sorted(names, key=lambda s: s.encode())
    assert all_keys(c, "lst", PaginationConfig={"PageSize": 5})[0] == \
        sorted(names, key=lambda s: s.encode())
    keys, prefixes = all_keys(c, "lst", Delimiter="/")
    assert prefixes == ["a b/", "dir0/", "dir1/", "dir2/"]
    assert keys == ["top", "top2", "z%25"]
    keys, prefixes = all_keys(c, "lst", Prefix="dir1/", Delimiter="/")
    assert keys == [f"dir1/file{j}" for j in range(4)] and prefixes == []
    r = c.list_objects_v2(Bucket="lst", MaxKeys=2)
    assert r["KeyCount"] == 2 and r["IsTruncated"] and "NextContinuationToken" in r
    o = r["Contents"][0]
    assert o["Size"] == len(o["Key"].encode()) and o["ETag"].startswith('"')
    r = c.list_objects_v2(Bucket="lst", StartAfter="top")
    assert [o["Key"] for o in r["Contents"]] == ["top2", "z%25"]
    r = c.list_objects_v2(Bucket="lst", Prefix="a b/", EncodingType="url")
    assert r["Contents"][0]["Key"] == "a%20b/%E2%82%AC%20x"   # as S3 encodes it
    # v1: marker and NextMarker (with a delimiter)
    r = c.list_objects(Bucket="lst", Delimiter="/", MaxKeys=2)
    assert r["IsTruncated"] and r["NextMarker"] == "dir0/"
    r = c.list_objects(Bucket="lst", Marker="dir2/file3")
    assert [o["Key"] for o in r["Contents"]] == ["top", "top2", "z%25"]
    assert c.list_objects_v2(Bucket="lst", MaxKeys=0)["KeyCount"] == 0
    assert error_of(lambda: c.list_objects_v2(Bucket="lst", StartAfter="k" * 1500))[0] == \
        "InvalidArgument"
    assert error_of(lambda: c.list_objects(Bucket="lst", Marker="k" * 1500))[0] == \
        "InvalidArgument"
    for token in ["A" * 2000, "!!!!", "QQ"]:     # too long for a key, not base64, short
        assert error_of(lambda: c.list_objects_v2(Bucket="lst", ContinuationToken=token))[0] \
            == "InvalidArgument", token
    assert error_of(lambda: c.list_objects_v2(Bucket="nolst"))[:2] == ("NoSuchBucket", 404)
    c.delete_object(Bucket="lst", Key="top")
    assert "top" not in all_keys(c, "lst")[0]


@pytest.mark.parametrize("how", ["clean", "kill"])
def test_listing_survives_restart(make_daemon, tmp_path, how):
    """A clean stop saves the indexes; kill -9 rebuilds them from the object
    metadata: either way the listing equals what was acknowledged."""
    d, _ = multi_drive(make_daemon, tmp_path)
    c = client(d)
    c.create_bucket(Bucket="keep")
    want = set()
    for i in range(60):
        c.put_object(Bucket="keep", Key=f"k/{i:03d}", Body=b"x" * i)
        want.add(f"k/{i:03d}")
    for i in range(0, 60, 7):
        c.delete_object(Bucket="keep", Key=f"k/{i:03d}")
        want.discard(f"k/{i:03d}")
    if how == "kill":
        d.signal(_signal.SIGKILL)
        d.proc.wait()
        d.stop(expect_rc=None)
    else:
        d.stop()
    d.start()
    keys = all_keys(client(d), "keep")[0]
    assert keys == sorted(want)
    # the start-up line says which way the indexes came back
    assert ("1 rebuilt from" if how == "kill" else "0 rebuilt from") in d.stderr()


def test_delete_objects(s3d):
    c = client(s3d)
    c.create_bucket(Bucket="multi")
    for i in range(30):
        c.put_object(Bucket="multi", Key=f"d/{i}", Body=b"x")
    objs = [{"Key": f"d/{i}"} for i in range(20)] + [{"Key": "never/there"}]
    r = c.delete_objects(Bucket="multi", Delete={"Objects": objs})
    assert sorted(d["Key"] for d in r["Deleted"]) == sorted(o["Key"] for o in objs)
    assert "Errors" not in r
    assert all_keys(c, "multi")[0] == sorted(f"d/{i}" for i in range(20, 30))
    r = c.delete_objects(Bucket="multi", Delete={"Objects": [{"Key": "d/20"},
                                                             {"Key": "d/21", "VersionId": "v9"}],
                                                 "Quiet": True})
    assert "Deleted" not in r
    assert [(e["Key"], e["Code"]) for e in r["Errors"]] == [("d/21", "NoSuchVersion")]
    too_many = [{"Key": f"k{i}"} for i in range(1001)]
    assert error_of(lambda: c.delete_objects(Bucket="multi",
                                             Delete={"Objects": too_many}))[0] == "MalformedXML"
    assert error_of(lambda: c.delete_objects(Bucket="nomulti",
                                             Delete={"Objects": [{"Key": "a"}]}))[0] in \
        ("NoSuchBucket",)


# -- the aws CLI ----------------------------------------------------------------

import subprocess  # noqa: E402
import sys  # noqa: E402


def aws(d, tmp_path, *args, check=True):
    env = {"PATH": os.environ.get("PATH", ""), "HOME": str(tmp_path),
           "AWS_ACCESS_KEY_ID": AK, "AWS_SECRET_ACCESS_KEY": SK,
           "AWS_DEFAULT_REGION": "us-east-1", "AWS_CONFIG_FILE": str(tmp_path / "none"),
           "AWS_SHARED_CREDENTIALS_FILE": str(tmp_path / "none")}
    cli = os.path.join(os.path.dirname(sys.executable), "aws")
    p = subprocess.run([cli, "--endpoint-url", d.url, *args], env=env, capture_output=True,
                       text=True, timeout=120)
    if check:
        assert p.returncode == 0, p.stderr
    return p


def test_aws_cli_cp_ls_sync_rm(s3d, tmp_path):
    # The empty file matters: the aws CLI's vendored botocore (1.43.x) keeps
    # the status of a final answer to an Expect: 100-continue request sent
    # without a 100 and applies it to the next request on that connection,
    # which then hangs for its 60 s read timeout. The server sends the 100
    # for bodiless requests too (http/server.c), as S3 does.
    src = tmp_path / "src"
    (src / "sub").mkdir(parents=True)
    files = {"a.txt": b"alpha", "sub/b.bin": os.urandom(3 << 20), "sub/c": b""}
    for name, data in files.items():
        (src / name).write_bytes(data)
    aws(s3d, tmp_path, "s3", "mb", "s3://cli")
    aws(s3d, tmp_path, "s3", "cp", str(src / "a.txt"), "s3://cli/one/a.txt")
    aws(s3d, tmp_path, "s3", "sync", str(src), "s3://cli/tree")
    out = aws(s3d, tmp_path, "s3", "ls", "--recursive", "s3://cli").stdout
    listed = sorted(line.split()[-1] for line in out.splitlines())
    assert listed == ["one/a.txt", "tree/a.txt", "tree/sub/b.bin", "tree/sub/c"], out
    out = aws(s3d, tmp_path, "s3", "ls", "s3://cli/tree/").stdout
    assert "PRE sub/" in out and "a.txt" in out
    dst = tmp_path / "dst"
    aws(s3d, tmp_path, "s3", "sync", "s3://cli/tree", str(dst))
    for name, data in files.items():
        assert (dst / name).read_bytes() == data, name
    head = aws(s3d, tmp_path, "s3api", "head-object", "--bucket", "cli", "--key",
               "tree/sub/b.bin").stdout
    assert '"ContentLength": %d' % (3 << 20) in head
    aws(s3d, tmp_path, "s3", "rm", "--recursive", "s3://cli/tree")
    out = aws(s3d, tmp_path, "s3", "ls", "--recursive", "s3://cli").stdout
    assert [line.split()[-1] for line in out.splitlines()] == ["one/a.txt"]
    p = aws(s3d, tmp_path, "s3", "rb", "s3://cli", check=False)
    assert p.returncode != 0 and "BucketNotEmpty" in p.stderr
    aws(s3d, tmp_path, "s3", "rb", "--force", "s3://cli")
    assert "cli" not in aws(s3d, tmp_path, "s3", "ls").stdout


def test_copy_object(s3d):
    c = client(s3d)
    c.create_bucket(Bucket="csrc")
    c.create_bucket(Bucket="cdst")
    body = os.urandom(3 * (1 << 20) + 11)
    etag = c.put_object(Bucket="csrc", Key="a", Body=body, ContentType="text/x-a",
                        Metadata={"m": "1"})["ETag"]
    r = c.copy_object(Bucket="cdst", Key="b c", CopySource={"Bucket": "csrc", "Key": "a"})
    assert r["CopyObjectResult"]["ETag"] == etag
    g = c.get_object(Bucket="cdst", Key="b c")
    assert g["Body"].read() == body
    assert g["ContentType"] == "text/x-a" and g["Metadata"] == {"m": "1"}
    # REPLACE takes the request's metadata; a self-copy needs it
    assert error_of(lambda: c.copy_object(Bucket="csrc", Key="a",
                                          CopySource={"Bucket": "csrc", "Key": "a"}))[0] == \
        "InvalidRequest"
    c.copy_object(Bucket="csrc", Key="a", CopySource={"Bucket": "csrc", "Key": "a"},
                  MetadataDirective="REPLACE", Metadata={"new": "2"}, ContentType="text/x-b")
    h = c.head_object(Bucket="csrc", Key="a")
    assert h["Metadata"] == {"new": "2"} and h["ContentType"] == "text/x-b"
    assert c.get_object(Bucket="csrc", Key="a")["Body"].read() == body
    assert error_of(lambda: c.copy_object(Bucket="cdst", Key="x",
                                          CopySource={"Bucket": "csrc", "Key": "a"},
                                          CopySourceIfMatch='"nope"'))[:2] == \
        ("PreconditionFailed", 412)
    assert error_of(lambda: c.copy_object(Bucket="cdst", Key="x",
                                          CopySource={"Bucket": "csrc", "Key": "none"}))[0] == \
        "NoSuchKey"
    assert error_of(lambda: c.copy_object(Bucket="nodst", Key="x",
                                          CopySource={"Bucket": "csrc", "Key": "a"}))[0] == \
        "NoSuchBucket"
    assert "b c" in all_keys(c, "cdst")[0]


def test_tags_on_put_and_get_object_tagging(s3d):
    c = client(s3d)
    c.create_bucket(Bucket="tags")
    c.put_object(Bucket="tags", Key="t", Body=b"x", Tagging="project=open%20lake&tier=hot")
    r = c.get_object_tagging(Bucket="tags", Key="t")
    assert {t["Key"]: t["Value"] for t in r["TagSet"]} == {"project": "open lake", "tier": "hot"}
    assert c.head_object(Bucket="tags", Key="t")["ResponseMetadata"]["HTTPHeaders"][
        "x-amz-tagging-count"] == "2"
    c.put_object(Bucket="tags", Key="u", Body=b"x")
    assert c.get_object_tagging(Bucket="tags", Key="u")["TagSet"] == []
    for bad in ["a=1&a=2", "aws:x=1", "&".join(f"k{i}=v" for i in range(11)),
                "k=" + "v" * 257, "k" * 129 + "=v"]:
        assert error_of(lambda: c.put_object(Bucket="tags", Key="bad", Body=b"x",
                                             Tagging=bad))[:2] == ("InvalidTag", 400), bad
    assert error_of(lambda: c.get_object_tagging(Bucket="tags", Key="none"))[0] == "NoSuchKey"


# -- multipart uploads ----------------------------------------------------------

MiB = 1 << 20


def test_multipart_with_boto3_transfer(s3d):
    from boto3.s3.transfer import TransferConfig
    import io
    c = client(s3d)
    c.create_bucket(Bucket="mpu")
    data = os.urandom(12 * MiB + 5)
    cfg = TransferConfig(multipart_threshold=5 * MiB, multipart_chunksize=5 * MiB,
                         max_concurrency=2)
    c.upload_fileobj(io.BytesIO(data), "mpu", "big/obj", Config=cfg)
    h = c.head_object(Bucket="mpu", Key="big/obj")
    assert h["ContentLength"] == len(data)
    md5s = b"".join(hashlib.md5(data[i:i + 5 * MiB]).digest()
                    for i in range(0, len(data), 5 * MiB))
    assert h["ETag"] == '"%s-3"' % hashlib.md5(md5s).hexdigest()
    assert c.get_object(Bucket="mpu", Key="big/obj")["Body"].read() == data
    lo, hi = 5 * MiB - 10, 10 * MiB + 10        # across both part boundaries
    r = c.get_object(Bucket="mpu", Key="big/obj", Range=f"bytes={lo}-{hi}")
    assert r["Body"].read() == data[lo:hi + 1]
    assert all_keys(c, "mpu")[0] == ["big/obj"]


def test_multipart_api_and_errors(s3d):
    c = client(s3d)
    c.create_bucket(Bucket="mpa")
    uid = c.create_multipart_upload(Bucket="mpa", Key="k", ContentType="text/x-m",
                                    Metadata={"a": "b"})["UploadId"]
    assert re.fullmatch(r"[0-9a-f]{32}", uid)
    p2 = c.upload_part(Bucket="mpa", Key="k", UploadId=uid, PartNumber=2, Body=b"tail")
    p1 = c.upload_part(Bucket="mpa", Key="k", UploadId=uid, PartNumber=1, Body=b"x" * (5 * MiB))
    p3 = c.upload_part(Bucket="mpa", Key="k", UploadId=uid, PartNumber=3, Body=b"unused")
    parts = c.list_parts(Bucket="mpa", Key="k", UploadId=uid)["Parts"]
    assert [(p["PartNumber"], p["Size"]) for p in parts] == [(1, 5 * MiB), (2, 4), (3, 6)]
    ups = c.list_multipart_uploads(Bucket="mpa")["Uploads"]
    assert [(u["Key"], u["UploadId"]) for u in ups] == [("k", uid)]

    def complete(lst):
        return c.complete_multipart_upload(Bucket="mpa", Key="k", UploadId=uid,
                                           MultipartUpload={"Parts": lst})
    one = {"PartNumber": 1, "ETag": p1["ETag"]}
    two = {"PartNumber": 2, "ETag": p2["ETag"]}
    assert error_of(lambda: complete([two, one]))[0] == "InvalidPartOrder"
    assert error_of(lambda: complete([one, {"PartNumber": 2, "ETag": p3["ETag"]}]))[0] == \
        "InvalidPart"
    assert error_of(lambda: complete([one, {"PartNumber": 7, "ETag": p2["ETag"]}]))[0] == \
        "InvalidPart"
    assert error_of(lambda: complete([two, {"PartNumber": 3, "ETag": p3["ETag"]}]))[0] == \
        "EntityTooSmall"
    r = complete([one, two])                   # part 3 left out: dropped
    assert r["ETag"].endswith('-2"')
    g = c.get_object(Bucket="mpa", Key="k")
    assert g["Body"].read() == b"x" * (5 * MiB) + b"tail"
    assert g["ContentType"] == "text/x-m" and g["Metadata"] == {"a": "b"}
    assert "Uploads" not in c.list_multipart_uploads(Bucket="mpa")
    assert error_of(lambda: c.list_parts(Bucket="mpa", Key="k", UploadId=uid))[0] == \
        "NoSuchUpload"
    u2 = c.create_multipart_upload(Bucket="mpa", Key="gone")["UploadId"]
    c.abort_multipart_upload(Bucket="mpa", Key="gone", UploadId=u2)
    assert error_of(lambda: c.upload_part(Bucket="mpa", Key="gone", UploadId=u2,
                                          PartNumber=1, Body=b"x"))[0] == "NoSuchUpload"
    assert error_of(lambda: c.abort_multipart_upload(Bucket="mpa", Key="gone",
                                                     UploadId="0" * 32))[0] == "NoSuchUpload"
    assert error_of(lambda: c.upload_part(Bucket="mpa", Key="k", UploadId="zz",
                                          PartNumber=1, Body=b"x"))[0] == "NoSuchUpload"
    assert error_of(lambda: c.create_multipart_upload(Bucket="nompa", Key="k"))[0] == \
        "NoSuchBucket"


def test_aws_cli_large_file_multipart(s3d, tmp_path):
    """The aws CLI uploads files over 8 MiB in parts; a 110 MiB file."""
    big = tmp_path / "big.bin"
    with open(big, "wb") as f:
        for _ in range(110):
            f.write(os.urandom(MiB))
    aws(s3d, tmp_path, "s3", "mb", "s3://large")
    aws(s3d, tmp_path, "s3", "cp", str(big), "s3://large/big.bin")
    out = tmp_path / "back.bin"
    aws(s3d, tmp_path, "s3", "cp", "s3://large/big.bin", str(out))
    with open(big, "rb") as a, open(out, "rb") as b:
        while True:
            x, y = a.read(MiB), b.read(MiB)
            assert x == y
            if not x:
                break
    head = aws(s3d, tmp_path, "s3api", "head-object", "--bucket", "large", "--key",
               "big.bin").stdout
    assert '"ContentLength": %d' % (110 * MiB) in head and '-14\\""' in head
