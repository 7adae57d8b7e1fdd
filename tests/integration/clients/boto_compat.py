"""Run by test_s3_boto_compat.py, once with .venv's python (the current
boto3) and once with .venv-boto135's (boto3 1.35, before 1.36 changed the
default checksums): one check of an AWS behaviour that boto3 relies on,
against the daemon at argv[1].

    boto_compat.py URL ACCESS_KEY SECRET_KEY REGION CHECK

Prints "OK boto3 <version>" at the end; a failed check raises (non-zero
exit, traceback on stderr). Uses only boto3 and the standard library.
"""
import http.client
import sys
import time
import urllib.error
import urllib.parse
import urllib.request

import boto3
import botocore
from botocore.config import Config

url, ak, sk, region, check = sys.argv[1:6]


def client(**cfg):
    cfg.setdefault("retries", {"max_attempts": 1})
    return boto3.client("s3", endpoint_url=url, aws_access_key_id=ak,
                        aws_secret_access_key=sk, region_name=region, config=Config(**cfg))


def make_bucket(c, name):
    if region == "us-east-1":
        return c.create_bucket(Bucket=name)
    return c.create_bucket(Bucket=name, CreateBucketConfiguration={"LocationConstraint": region})


def error_of(fn):
    try:
        fn()
    except botocore.exceptions.ClientError as e:
        r = e.response
        return r["Error"]["Code"], r["ResponseMetadata"]["HTTPStatusCode"], r["Error"]
    raise AssertionError("no error")


def raw_bodies(c, op):
    """The response bodies of c's calls of op, as sent (before botocore's
    parser and its url-decoding)."""
    bodies = []
    c.meta.events.register(f"after-call.s3.{op}",
                           lambda http_response, **kw: bodies.append(http_response.content))
    return bodies


def http_status(method, u, body=None, headers=None):
    """(status, body) of a request to a presigned URL, sent as is (no
    Content-Type added, unlike urllib for a body)."""
    p = urllib.parse.urlsplit(u)
    conn = http.client.HTTPConnection(p.hostname, p.port, timeout=30)
    conn.request(method, p.path + "?" + p.query, body=body, headers=headers or {})
    r = conn.getresponse()
    data = r.read()
    conn.close()
    return r.status, data


# -- ListObjectsV2: ContinuationToken='' ----------------------------------------

def list_v2_empty_token():
    c = client()
    make_bucket(c, "tok")
    for k in ["a", "b", "c"]:
        c.put_object(Bucket="tok", Key=k, Body=k.encode())
    r = c.list_objects_v2(Bucket="tok", ContinuationToken="")
    # echoed, empty; the listing starts at the beginning
    assert r["ContinuationToken"] == "", r
    assert [o["Key"] for o in r["Contents"]] == ["a", "b", "c"] and not r["IsTruncated"]
    assert "ContinuationToken" not in c.list_objects_v2(Bucket="tok")
    r = c.list_objects_v2(Bucket="tok", MaxKeys=1)
    tok = r["NextContinuationToken"]
    r = c.list_objects_v2(Bucket="tok", ContinuationToken=tok)
    assert r["ContinuationToken"] == tok and [o["Key"] for o in r["Contents"]] == ["b", "c"]


# -- ListObjects (v1), encoding-type=url: Prefix as sent --------------------------

KEYS = ["a b/€ 1", "a b/€ 2", "a b/x+y%z/3", "a+b/4", "top"]


def list_v1_prefix():
    c = client()
    make_bucket(c, "pfx")
    for k in KEYS:
        c.put_object(Bucket="pfx", Key=k, Body=b"x")
    raw = raw_bodies(c, "ListObjects")
    # boto3 asks for encoding-type=url and decodes Delimiter, Marker,
    # NextMarker, Key and CommonPrefixes' Prefix (not Prefix) for v1
    r = c.list_objects(Bucket="pfx", Prefix="a b/", Delimiter="/")
    assert r["EncodingType"] == "url" and r["Prefix"] == "a b/", r
    assert [o["Key"] for o in r["Contents"]] == ["a b/€ 1", "a b/€ 2"]
    assert [p["Prefix"] for p in r["CommonPrefixes"]] == ["a b/x+y%z/"]
    assert b"<Prefix>a b/</Prefix>" in raw[-1], raw[-1]
    assert b"<Key>a%20b/%E2%82%AC%201</Key>" in raw[-1], raw[-1]
    r = c.list_objects(Bucket="pfx", Prefix="a b/€")
    assert r["Prefix"] == "a b/€" and len(r["Contents"]) == 2
    # pages of one: the (decoded) NextMarker goes back as marker
    keys, prefixes = [], []
    for page in c.get_paginator("list_objects").paginate(
            Bucket="pfx", Prefix="a b/", Delimiter="/", PaginationConfig={"PageSize": 1}):
        assert page["Prefix"] == "a b/"
        keys += [o["Key"] for o in page.get("Contents", [])]
        prefixes += [p["Prefix"] for p in page.get("CommonPrefixes", [])]
    assert keys == ["a b/€ 1", "a b/€ 2"] and prefixes == ["a b/x+y%z/"], (keys, prefixes)
    r = c.list_objects(Bucket="pfx", Marker="a b/€ 1", Prefix="a")
    assert r["Marker"] == "a b/€ 1" and r["Prefix"] == "a"
    assert [o["Key"] for o in r["Contents"]] == ["a b/€ 2", "a+b/4"]   # byte order
    # v2 encodes Prefix, and boto3 decodes it
    raw2 = raw_bodies(c, "ListObjectsV2")
    r = c.list_objects_v2(Bucket="pfx", Prefix="a b/€", StartAfter="a b/€ 1")
    assert r["Prefix"] == "a b/€" and r["StartAfter"] == "a b/€ 1"
    assert [o["Key"] for o in r["Contents"]] == ["a b/€ 2"]
    assert b"<Prefix>a%20b/%E2%82%AC</Prefix>" in raw2[-1], raw2[-1]


# -- CreateBucket of a bucket one owns ------------------------------------------

def create_bucket_again():
    c = client()
    make_bucket(c, "again")
    c.put_object(Bucket="again", Key="k", Body=b"kept")
    if region == "us-east-1":
        r = make_bucket(c, "again")   # AWS's legacy answer in us-east-1
        assert r["ResponseMetadata"]["HTTPStatusCode"] == 200 and r["Location"] == "/again", r
    else:
        code, status, _ = error_of(lambda: make_bucket(c, "again"))
        assert (code, status) == ("BucketAlreadyOwnedByYou", 409), (code, status)
    assert c.get_object(Bucket="again", Key="k")["Body"].read() == b"kept"
    assert [b["Name"] for b in c.list_buckets()["Buckets"]] == ["again"]


# -- ListBuckets: max-buckets, continuation-token, prefix, bucket-region -------------

NAMES = ["lb-a", "lb-b1", "lb-b2", "lb-c", "other"]


def list_buckets_params():
    c = client()
    for n in NAMES:
        make_bucket(c, n)
    r = c.list_buckets()
    assert [b["Name"] for b in r["Buckets"]] == NAMES
    assert "BucketRegion" not in r["Buckets"][0] and "ContinuationToken" not in r
    assert "Prefix" not in r
    r = c.list_buckets(MaxBuckets=2)
    assert [b["Name"] for b in r["Buckets"]] == NAMES[:2], r
    assert all(b["BucketRegion"] == region for b in r["Buckets"])
    tok = r["ContinuationToken"]
    r = c.list_buckets(MaxBuckets=2, ContinuationToken=tok)
    assert [b["Name"] for b in r["Buckets"]] == NAMES[2:4]
    r = c.list_buckets(MaxBuckets=2, ContinuationToken=r["ContinuationToken"])
    assert [b["Name"] for b in r["Buckets"]] == NAMES[4:] and "ContinuationToken" not in r
    names = []
    for page in c.get_paginator("list_buckets").paginate(PaginationConfig={"PageSize": 2}):
        assert len(page["Buckets"]) <= 2
        names += [b["Name"] for b in page["Buckets"]]
    assert names == NAMES
    r = c.list_buckets(Prefix="lb-b")
    assert r["Prefix"] == "lb-b" and [b["Name"] for b in r["Buckets"]] == ["lb-b1", "lb-b2"]
    r = c.list_buckets(Prefix="lb-", MaxBuckets=3)
    assert [b["Name"] for b in r["Buckets"]] == NAMES[:3]
    r = c.list_buckets(Prefix="lb-", MaxBuckets=3, ContinuationToken=r["ContinuationToken"])
    assert [b["Name"] for b in r["Buckets"]] == ["lb-c"] and "ContinuationToken" not in r
    assert [b["Name"] for b in c.list_buckets(BucketRegion=region)["Buckets"]] == NAMES
    other = "eu-north-1" if region != "eu-north-1" else "us-east-1"
    assert c.list_buckets(BucketRegion=other)["Buckets"] == []
    loose = client(parameter_validation=False)
    for bad in [{"MaxBuckets": 0}, {"MaxBuckets": 10001}, {"ContinuationToken": "!!!!"}]:
        code, status, _ = error_of(lambda: loose.list_buckets(**bad))
        assert (code, status) == ("InvalidArgument", 400), (bad, code, status)


# -- Signature Version 2 ------------------------------------------------------------

def sigv2():
    c = client()   # no signature_version: boto3 presigns with SigV2
    make_bucket(c, "pre2")
    key = "a b+c/€"
    put = c.generate_presigned_url("put_object", Params={"Bucket": "pre2", "Key": key},
                                   ExpiresIn=300)
    q = urllib.parse.parse_qs(urllib.parse.urlsplit(put).query)
    assert sorted(q) == ["AWSAccessKeyId", "Expires", "Signature"], put
    assert http_status("PUT", put, b"presigned v2") == (200, b"")
    get = c.generate_presigned_url("get_object", Params={"Bucket": "pre2", "Key": key},
                                   ExpiresIn=300)
    assert "AWSAccessKeyId=" in get
    with urllib.request.urlopen(get, timeout=30) as r:
        assert r.read() == b"presigned v2"
    # response-* overrides are signed sub-resources
    disp = c.generate_presigned_url("get_object", ExpiresIn=300, Params={
        "Bucket": "pre2", "Key": key, "ResponseContentType": "text/x-test"})
    with urllib.request.urlopen(disp, timeout=30) as r:
        assert r.headers["Content-Type"] == "text/x-test"
    # tampered: another signature, another key, another method
    for bad, method in [(get.replace("Signature=", "Signature=A"), "GET"),
                        (get.replace("/pre2/", "/pre2/x"), "GET"), (get, "DELETE")]:
        status, body = http_status(method, bad)
        assert status == 403 and b"<Code>SignatureDoesNotMatch</Code>" in body, (bad, body)
    # a Content-Type the URL was not signed with
    status, body = http_status("PUT", put, b"x", {"Content-Type": "text/plain"})
    assert status == 403 and b"SignatureDoesNotMatch" in body, body
    # expired
    short = c.generate_presigned_url("get_object", Params={"Bucket": "pre2", "Key": key},
                                     ExpiresIn=1)
    time.sleep(2.1)
    status, body = http_status("GET", short)
    assert status == 403 and b"<Code>AccessDenied</Code>" in body, body
    assert b"Request has expired" in body, body
    # the header form, with sub-resources: a multipart upload, versioning, tags, delete
    v2 = client(signature_version="s3")
    v2.put_object(Bucket="pre2", Key="h/one", Body=b"1" * 1000, Metadata={"m": "v"})
    o = v2.get_object(Bucket="pre2", Key="h/one")
    assert o["Body"].read() == b"1" * 1000 and o["Metadata"] == {"m": "v"}
    assert v2.head_bucket(Bucket="pre2")["ResponseMetadata"]["HTTPStatusCode"] == 200
    up = v2.create_multipart_upload(Bucket="pre2", Key="h/mp")["UploadId"]
    e1 = v2.upload_part(Bucket="pre2", Key="h/mp", UploadId=up, PartNumber=1,
                        Body=b"p" * (5 << 20))["ETag"]
    e2 = v2.upload_part(Bucket="pre2", Key="h/mp", UploadId=up, PartNumber=2,
                        Body=b"q")["ETag"]
    assert len(v2.list_parts(Bucket="pre2", Key="h/mp", UploadId=up)["Parts"]) == 2
    v2.complete_multipart_upload(Bucket="pre2", Key="h/mp", UploadId=up, MultipartUpload={
        "Parts": [{"PartNumber": 1, "ETag": e1}, {"PartNumber": 2, "ETag": e2}]})
    assert v2.head_object(Bucket="pre2", Key="h/mp")["ContentLength"] == (5 << 20) + 1
    v2.put_object_tagging(Bucket="pre2", Key="h/one",
                          Tagging={"TagSet": [{"Key": "t", "Value": "1"}]})
    assert v2.get_object_tagging(Bucket="pre2", Key="h/one")["TagSet"] == \
        [{"Key": "t", "Value": "1"}]
    keys = [o["Key"] for o in v2.list_objects_v2(Bucket="pre2", Prefix="h/")["Contents"]]
    assert keys == ["h/mp", "h/one"], keys
    v2.delete_objects(Bucket="pre2", Delete={"Objects": [{"Key": "h/mp"}, {"Key": "h/one"}]})
    assert "Contents" not in v2.list_objects_v2(Bucket="pre2", Prefix="h/")
    wrong = boto3.client("s3", endpoint_url=url, aws_access_key_id=ak,
                         aws_secret_access_key="wrong-secret", region_name=region,
                         config=Config(signature_version="s3", retries={"max_attempts": 1}))
    code, status, _ = error_of(wrong.list_buckets)
    assert (code, status) == ("SignatureDoesNotMatch", 403), (code, status)


def sigv2_off():
    """s3_sigv2 = false: SigV2 refused (presigned and header), SigV4 served."""
    c = client()
    make_bucket(c, "off")
    get = c.generate_presigned_url("get_object", Params={"Bucket": "off", "Key": "k"})
    assert "AWSAccessKeyId=" in get
    status, body = http_status("GET", get)
    assert status == 403 and b"<Code>AccessDenied</Code>" in body, body
    assert b"Signature Version 2 is turned off on this server (s3_sigv2 = false)" in body, body
    code, status, err = error_of(lambda: client(signature_version="s3").list_buckets())
    assert (code, status) == ("AccessDenied", 403) and "s3_sigv2 = false" in err["Message"]
    v4 = client(signature_version="s3v4")
    v4.put_object(Bucket="off", Key="k", Body=b"v4")
    get = v4.generate_presigned_url("get_object", Params={"Bucket": "off", "Key": "k"})
    assert http_status("GET", get) == (200, b"v4")


CHECKS = {f.__name__: f for f in [list_v2_empty_token, list_v1_prefix, create_bucket_again,
                                   list_buckets_params, sigv2, sigv2_off]}
CHECKS[check]()
print("OK boto3", boto3.__version__)
