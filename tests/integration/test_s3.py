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


def test_signed_requests_pass_authentication(s3d):
    """A correctly signed request gets past authentication: whatever the
    operation answers, it is not an authentication error."""
    code, status, r = error_of(lambda: client(s3d).list_buckets())
    assert code not in ("AccessDenied", "SignatureDoesNotMatch", "InvalidAccessKeyId"), r
    rid = r["ResponseMetadata"]["HTTPHeaders"]["x-amz-request-id"]
    assert re.fullmatch(r"[0-9A-F]{16}", rid)
    assert r["ResponseMetadata"]["RequestId"] == rid


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
    # Signature Version 2 (boto3's default for presigning) gets a message saying what to do
    v2 = client(s3d).generate_presigned_url("get_object", Params={"Bucket": "bkt", "Key": "k"})
    with pytest.raises(urllib.error.HTTPError) as e:
        urllib.request.urlopen(v2, timeout=10)
    body = e.value.read()
    assert e.value.code == 403 and b"Signature Version 2 is not supported" in body, body


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
    code, _, _ = error_of(lambda: client(d, ak, sk).list_buckets())
    assert code != "InvalidAccessKeyId" and code != "SignatureDoesNotMatch"
    d.stop()
    d.start()
    banner2 = "".join(d.proc.stdout.readline() for _ in range(5))
    assert sk not in banner2 and "s3.credentials" in banner2
    assert path.read_text() == text                # the same pair after a restart
    code, _, _ = error_of(lambda: client(d, ak, sk).list_buckets())
    assert code != "InvalidAccessKeyId"
