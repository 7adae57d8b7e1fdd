"""Run by test_s3_checksums.py with two boto3s: the current one (.venv,
boto3 >= 1.36: default CRC32 checksums, ChecksumType, CRC64NVME) and an
older one (.venv-boto135, boto3 1.35: none of those, so this script sends
x-amz-checksum-type and CRC-64/NVME values as headers of its own, as code
written for it must). argv: endpoint (https), access key, secret key, the
CA file of the daemon's certificate. Checks, as AWS S3 behaves:

  - Complete of a composite (SHA256) upload whose list leaves out the part
    checksums: 400 InvalidRequest, never 500; with them: 200;
  - Complete carrying the composite "<base64>-N" the server itself
    returned (x-amz-checksum-sha256): accepted; another value: BadDigest;
  - ChecksumType FULL_OBJECT (CRC32, CRC32C, CRC64NVME): echoed by the
    create; Complete with the CRC of the whole object: 200, and that value
    from Complete and from HEAD with x-amz-checksum-type FULL_OBJECT; a
    wrong one: BadDigest; SHA256 + FULL_OBJECT and CRC64NVME + COMPOSITE
    refused at create;
  - Content-Encoding "gzip" sent as "gzip,aws-chunked" (a trailer checksum
    over TLS): stored as "gzip".

Prints "OK" at the end; any failed check raises (non-zero exit)."""
import base64
import hashlib
import os
import sys
import zlib

import boto3
import botocore
from botocore.config import Config

url, ak, sk, cafile = sys.argv[1:5]
MiB = 1024 * 1024
c = boto3.client("s3", endpoint_url=url, aws_access_key_id=ak, aws_secret_access_key=sk,
                 region_name="us-east-1", verify=cafile,
                 config=Config(retries={"max_attempts": 1}))
NEW = "ChecksumType" in c.meta.service_model.operation_model(
    "CreateMultipartUpload").input_shape.members
print("boto3", boto3.__version__, "ChecksumType known:", NEW)


# ---- CRCs boto3 1.35 cannot compute without awscrt (not installed) ----

def _table(poly, width):
    t = []
    for i in range(256):
        x = i
        for _ in range(8):
            x = (x >> 1) ^ (poly if x & 1 else 0)
        t.append(x)
    return t, (1 << width) - 1


_CRC = {"CRC32C": _table(0x82F63B78, 32), "CRC64NVME": _table(0x9A6C9329AC4BC9B5, 64)}


def crc(algo, data, prev=0):
    """The CRC of data (continued from prev, the CRC of what came before)."""
    if algo == "CRC32":
        return zlib.crc32(data, prev)
    t, mask = _CRC[algo]
    x = prev ^ mask
    for b in data:
        x = t[(x ^ b) & 0xFF] ^ (x >> 8)
    return x ^ mask


def b64(algo, value):
    n = 8 if algo == "CRC64NVME" else 4
    return base64.b64encode(value.to_bytes(n, "big")).decode()


# ---- headers of our own for what boto3 1.35 does not know ----

def extra_headers(op, headers):
    """Calls of op (e.g. "CreateMultipartUpload") get these headers until
    the returned function is called."""
    def add(request, **kw):
        for k, v in headers.items():
            request.headers[k] = v
    ev = "before-sign.s3." + op
    c.meta.events.register(ev, add)
    return lambda: c.meta.events.unregister(ev, add)


def error_of(fn):
    try:
        fn()
    except botocore.exceptions.ClientError as e:
        r = e.response
        return r["Error"]["Code"], r["ResponseMetadata"]["HTTPStatusCode"], r["Error"].get(
            "Message", "")
    raise AssertionError("no error")


def hdrs(r):
    return r["ResponseMetadata"]["HTTPHeaders"]


B = "cks-" + ("new" if NEW else "old")
c.create_bucket(Bucket=B)
big = os.urandom(5 * MiB + 17)
tail = os.urandom(3000)

# ---- 1, 2: a composite SHA256 upload --------------------------------------------------
uid = c.create_multipart_upload(Bucket=B, Key="sha", ChecksumAlgorithm="SHA256")["UploadId"]
parts = []
for i, body in enumerate((big, tail), 1):
    r = c.upload_part(Bucket=B, Key="sha", UploadId=uid, PartNumber=i, Body=body,
                      ChecksumAlgorithm="SHA256")
    assert r["ChecksumSHA256"] == base64.b64encode(hashlib.sha256(body).digest()).decode()
    parts.append({"PartNumber": i, "ETag": r["ETag"], "ChecksumSHA256": r["ChecksumSHA256"]})
bare = [{"PartNumber": p["PartNumber"], "ETag": p["ETag"]} for p in parts]


def complete_sha(lst, **kw):
    return c.complete_multipart_upload(Bucket=B, Key="sha", UploadId=uid,
                                       MultipartUpload={"Parts": lst}, **kw)


code, status, msg = error_of(lambda: complete_sha(bare))
assert (code, status) == ("InvalidRequest", 400), (code, status, msg)
assert "must include the checksum for each part" in msg and "part 1" in msg, msg
code, status, msg = error_of(lambda: complete_sha([bare[0], parts[1]]))
assert (code, status) == ("InvalidRequest", 400) and "part 1" in msg, msg
code, status, _ = error_of(lambda: complete_sha([parts[0], bare[1]]))
assert (code, status) == ("InvalidRequest", 400)
comp = base64.b64encode(hashlib.sha256(b"".join(
    base64.b64decode(p["ChecksumSHA256"]) for p in parts)).digest()).decode() + "-2"
wrong = base64.b64encode(b"\0" * 32).decode() + "-2"
assert error_of(lambda: complete_sha(parts, ChecksumSHA256=wrong))[:2] == ("BadDigest", 400)
assert error_of(lambda: complete_sha(parts, ChecksumSHA256=comp[:-1] + "3"))[:2] == \
    ("BadDigest", 400)
r = complete_sha(parts, ChecksumSHA256=comp)          # the value S3 itself answers
assert r["ChecksumSHA256"] == comp, (r, comp)
r2 = complete_sha(parts, ChecksumSHA256=comp)         # a Complete again: the same answer
assert r2["ChecksumSHA256"] == comp and r2["ETag"] == r["ETag"]
h = hdrs(c.head_object(Bucket=B, Key="sha", ChecksumMode="ENABLED"))
assert h["x-amz-checksum-sha256"] == comp and h["x-amz-checksum-type"] == "COMPOSITE", h
assert c.get_object(Bucket=B, Key="sha")["Body"].read() == big + tail

# ---- 3: FULL_OBJECT ---------------------------------------------------------------------

def create_full_object(key, algo):
    if NEW:
        return c.create_multipart_upload(Bucket=B, Key=key, ChecksumAlgorithm=algo,
                                         ChecksumType="FULL_OBJECT")
    undo = extra_headers("CreateMultipartUpload", {"x-amz-checksum-type": "FULL_OBJECT"})
    try:
        return c.create_multipart_upload(Bucket=B, Key=key, ChecksumAlgorithm=algo)
    finally:
        undo()


def upload_crc_parts(key, uid, algo, bodies):
    """UploadPart of each body with its CRC; the parts list, without the
    part checksums (a FULL_OBJECT Complete may leave them out)."""
    header = "x-amz-checksum-" + algo.lower()
    lst = []
    for i, body in enumerate(bodies, 1):
        v = b64(algo, crc(algo, body))
        old64 = not NEW and algo == "CRC64NVME"
        undo = extra_headers("UploadPart", {header: v} if old64 else {})
        try:
            r = c.upload_part(Bucket=B, Key=key, UploadId=uid, PartNumber=i, Body=body,
                              **({} if old64 else {"Checksum" + algo: v}))
        finally:
            undo()
        assert hdrs(r)[header] == v
        lst.append({"PartNumber": i, "ETag": r["ETag"]})
    return lst


def complete_with(key, uid, lst, algo, value, ctype="FULL_OBJECT"):
    """Complete with x-amz-checksum-<algo>: value (None: none) and
    x-amz-checksum-type: ctype (None: none)."""
    add, kw = {}, {}
    if ctype:
        kw, add = ({"ChecksumType": ctype}, {}) if NEW else ({}, {"x-amz-checksum-type": ctype})
    if value is not None:
        if NEW or algo != "CRC64NVME":
            kw["Checksum" + algo] = value
        else:
            add["x-amz-checksum-" + algo.lower()] = value
    undo = extra_headers("CompleteMultipartUpload", add)
    try:
        return c.complete_multipart_upload(Bucket=B, Key=key, UploadId=uid,
                                           MultipartUpload={"Parts": lst}, **kw)
    finally:
        undo()


for algo in ("CRC32", "CRC32C", "CRC64NVME"):
    key = "full-" + algo.lower()
    header = "x-amz-checksum-" + algo.lower()
    r = create_full_object(key, algo)
    assert hdrs(r)["x-amz-checksum-algorithm"] == algo
    assert hdrs(r)["x-amz-checksum-type"] == "FULL_OBJECT", hdrs(r)
    uid = r["UploadId"]
    lst = upload_crc_parts(key, uid, algo, (big, tail))
    whole = b64(algo, crc(algo, tail, crc(algo, big)))   # the CRC of the whole object
    wrong = b64(algo, crc(algo, tail))
    code, status, msg = error_of(lambda: complete_with(key, uid, lst, algo, wrong))
    assert (code, status) == ("BadDigest", 400), (algo, code, msg)
    code, status, msg = error_of(lambda: complete_with(key, uid, lst, algo, whole, "COMPOSITE"))
    assert (code, status) == ("InvalidRequest", 400) and "FULL_OBJECT" in msg, msg
    code, status, msg = error_of(lambda: complete_with(key, uid, lst, algo, whole + "-2"))
    assert (code, status) == ("InvalidRequest", 400), msg
    r = complete_with(key, uid, lst, algo, whole)
    if NEW:
        assert r["Checksum" + algo] == whole and r["ChecksumType"] == "FULL_OBJECT", r
    h = hdrs(c.head_object(Bucket=B, Key=key, ChecksumMode="ENABLED"))
    assert h[header] == whole and h["x-amz-checksum-type"] == "FULL_OBJECT", h
    g = c.get_object(Bucket=B, Key=key, ChecksumMode="ENABLED")
    assert hdrs(g)[header] == whole and g["Body"].read() == big + tail
    # without an expected value or a type: the server's combine alone
    uid = create_full_object(key + "-b", algo)["UploadId"]
    lst = upload_crc_parts(key + "-b", uid, algo, (big, tail))
    complete_with(key + "-b", uid, lst, algo, None, None)
    h = hdrs(c.head_object(Bucket=B, Key=key + "-b", ChecksumMode="ENABLED"))
    assert h[header] == whole, (algo, h)

# the types S3 refuses at create
for algo, ctype in (("SHA256", "FULL_OBJECT"), ("SHA1", "FULL_OBJECT"),
                    ("CRC64NVME", "COMPOSITE")):
    undo = extra_headers("CreateMultipartUpload", {"x-amz-checksum-type": ctype})
    code, status, msg = error_of(lambda: c.create_multipart_upload(
        Bucket=B, Key="refused", ChecksumAlgorithm=algo))
    undo()
    assert (code, status) == ("InvalidRequest", 400), (algo, ctype, code, msg)
    assert msg == "The %s checksum type cannot be used with the %s checksum algorithm." % (
        ctype, algo.lower()), msg
# CRC64NVME without a type is FULL_OBJECT; CRC32 without one COMPOSITE
r = c.create_multipart_upload(Bucket=B, Key="dflt", ChecksumAlgorithm="CRC64NVME")
assert hdrs(r)["x-amz-checksum-type"] == "FULL_OBJECT"
c.abort_multipart_upload(Bucket=B, Key="dflt", UploadId=r["UploadId"])
r = c.create_multipart_upload(Bucket=B, Key="dflt", ChecksumAlgorithm="CRC32")
assert hdrs(r)["x-amz-checksum-type"] == "COMPOSITE"
c.abort_multipart_upload(Bucket=B, Key="dflt", UploadId=r["UploadId"])

# ---- 4: Content-Encoding over TLS with a trailer checksum --------------------------------
sent = []
c.meta.events.register("before-send.s3.PutObject",
                       lambda request, **kw: sent.append(request.headers.get("Content-Encoding")))
c.put_object(Bucket=B, Key="gz", Body=zlib.compress(b"x" * 1000), ContentEncoding="gzip",
             ChecksumAlgorithm="CRC32")
assert sent[-1] in (b"gzip,aws-chunked", "gzip,aws-chunked"), sent
assert c.head_object(Bucket=B, Key="gz")["ContentEncoding"] == "gzip"
print("OK")
