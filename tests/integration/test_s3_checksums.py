"""Flexible checksums of multipart uploads, and what the S3 API stores of a
body's framing, as AWS S3 does them. Real daemon; raw signed requests
where the bytes on the wire matter, boto3 for the rest.
"""
import base64
import http.client
import os
import subprocess
import sys
import zlib

import pytest

from botocore.auth import SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials

from conftest import ROOT
from test_s3 import AK, SK, client, s3d  # noqa: F401  (s3d is a fixture)
from test_s3_net import tls_daemon

MiB = 1024 * 1024


def raw(d, method, path, body=b"", headers=None, payload="UNSIGNED-PAYLOAD"):
    """One SigV4-signed request with exactly these headers and body bytes.
    Returns (status, lower-cased headers, body)."""
    req = AWSRequest(method=method, url=d.url + path, data=body, headers=dict(headers or {}))
    req.headers["x-amz-content-sha256"] = payload
    SigV4Auth(Credentials(AK, SK), "s3", "us-east-1").add_auth(req)
    conn = http.client.HTTPConnection("127.0.0.1", d.port, timeout=30)
    try:
        conn.putrequest(method, path, skip_accept_encoding=True)
        for k, v in req.headers.items():
            conn.putheader(k, v)
        if "content-length" not in {k.lower() for k in req.headers.keys()}:
            conn.putheader("Content-Length", str(len(body)))
        conn.endheaders()
        if body:
            conn.send(body)
        r = conn.getresponse()
        return r.status, {k.lower(): v for k, v in r.getheaders()}, r.read()
    finally:
        conn.close()


def chunked_put(d, path, data, content_encoding):
    """A PUT framed as boto3 frames it over TLS (aws-chunked, unsigned, a
    CRC32 trailer), with the Content-Encoding given."""
    crc = base64.b64encode(zlib.crc32(data).to_bytes(4, "big")).decode()
    body = b"%x\r\n" % len(data) + data + b"\r\n0\r\nx-amz-checksum-crc32:" + \
        crc.encode() + b"\r\n\r\n"
    return raw(d, "PUT", path, body, {
        "Content-Encoding": content_encoding, "x-amz-decoded-content-length": str(len(data)),
        "x-amz-trailer": "x-amz-checksum-crc32", "Content-Length": str(len(body))},
        payload="STREAMING-UNSIGNED-PAYLOAD-TRAILER")


def test_aws_chunked_is_dropped_from_the_stored_content_encoding(s3d):
    """aws-chunked is the framing of the request, not an encoding of the
    object: S3 drops it wherever it stands in the list and keeps the rest
    (boto3 over TLS sends "gzip,aws-chunked" for ContentEncoding="gzip")."""
    c = client(s3d)
    c.create_bucket(Bucket="ceb")
    cases = [("aws-chunked", None), ("gzip, aws-chunked", "gzip"), ("gzip,aws-chunked", "gzip"),
             ("aws-chunked,gzip", "gzip"), ("AWS-Chunked , br", "br"),
             ("gzip, aws-chunked, br", "gzip, br"), ("gzip,br", "gzip,br"),
             ("aws-chunked, aws-chunked", None), ("x-aws-chunked", "x-aws-chunked")]
    for i, (sent, stored) in enumerate(cases):
        status, _, body = chunked_put(s3d, f"/ceb/k{i}", b"payload %d" % i, sent)
        assert status == 200, (sent, body)
        h = c.head_object(Bucket="ceb", Key=f"k{i}")
        assert h.get("ContentEncoding") == stored, sent
        assert c.get_object(Bucket="ceb", Key=f"k{i}")["Body"].read() == b"payload %d" % i
    # the same rule at CreateMultipartUpload
    uid = c.create_multipart_upload(Bucket="ceb", Key="m", ContentEncoding="gzip, aws-chunked")
    e = c.upload_part(Bucket="ceb", Key="m", UploadId=uid["UploadId"], PartNumber=1,
                      Body=b"part")["ETag"]
    c.complete_multipart_upload(Bucket="ceb", Key="m", UploadId=uid["UploadId"],
                                MultipartUpload={"Parts": [{"PartNumber": 1, "ETag": e}]})
    assert c.head_object(Bucket="ceb", Key="m")["ContentEncoding"] == "gzip"


OLD_BOTO3_PY = os.path.join(ROOT, ".venv-boto135", "bin", "python")


@pytest.mark.parametrize("boto", ["this", "1.35"])
def test_multipart_checksums_with_boto3(make_daemon, tmp_path, boto):
    """clients/boto3_checksums.py, over TLS, with the boto3 these tests run
    with (.venv's, >= 1.36) and with boto3 1.35 (.venv-boto135): composite
    Completes without part checksums (400, never 500) and with the
    server's own "-N" value, FULL_OBJECT uploads of the three CRCs, and
    Content-Encoding."""
    py = sys.executable if boto == "this" else OLD_BOTO3_PY
    if not os.path.exists(py):
        pytest.skip("no .venv-boto135: run `make test-deps` (scripts/deps.sh test)")
    d, cert = tls_daemon(make_daemon, tmp_path)
    script = os.path.join(os.path.dirname(__file__), "clients", "boto3_checksums.py")
    r = subprocess.run([py, script, d.url, AK, SK, str(cert)], capture_output=True, text=True,
                       timeout=600)
    assert r.returncode == 0 and r.stdout.strip().endswith("OK"), r.stdout + r.stderr
    assert boto == "this" or "boto3 1.35.99 ChecksumType known: False" in r.stdout
    assert "InternalError" not in d.stderr()


def sha(b):
    import hashlib
    return base64.b64encode(hashlib.sha256(b).digest()).decode()


def complete_xml(parts):
    """A CompleteMultipartUpload body: parts are (number, etag, {"SHA256": value, ...})."""
    out = "<CompleteMultipartUpload>"
    for n, etag, cks in parts:
        out += "<Part><PartNumber>%d</PartNumber><ETag>%s</ETag>" % (n, etag)
        out += "".join("<Checksum%s>%s</Checksum%s>" % (a, v, a) for a, v in cks.items())
        out += "</Part>"
    return (out + "</CompleteMultipartUpload>").encode()


def error_code(body):
    import re
    m = re.search(rb"<Code>([^<]*)</Code>.*<Message>([^<]*)</Message>", body, re.S)
    return (m.group(1).decode(), m.group(2).decode()) if m else (None, None)


def test_checksum_rules_of_create_upload_part_and_complete(s3d):
    """What S3 answers to each checksum mistake around a multipart upload
    (none of them a 500), and the checksum type in ListParts and
    ListMultipartUploads."""
    from test_s3 import error_of
    c = client(s3d)
    c.create_bucket(Bucket="rules")
    # CreateMultipartUpload
    for hdrs, msg in (({"x-amz-checksum-algorithm": "CRC32", "x-amz-checksum-type": "BOTH"},
                       "Value for x-amz-checksum-type header is invalid."),
                      ({"x-amz-checksum-type": "FULL_OBJECT"},
                       "The x-amz-checksum-type header can only be used with the "
                       "x-amz-checksum-algorithm header.")):
        status, _, body = raw(s3d, "POST", "/rules/k?uploads", headers=hdrs)
        assert (status, error_code(body)) == (400, ("InvalidRequest", msg))
    # UploadPart into a SHA256 upload: with that checksum only
    uid = c.create_multipart_upload(Bucket="rules", Key="k",
                                    ChecksumAlgorithm="SHA256")["UploadId"]
    q = f"/rules/k?partNumber=1&uploadId={uid}"
    status, _, body = raw(s3d, "PUT", q, b"abc")
    assert (status, error_code(body)) == (400, ("InvalidRequest", "Checksum Type mismatch "
                                               "occurred, expected checksum Type: sha256, "
                                               "actual checksum Type: null"))
    status, _, body = raw(s3d, "PUT", q, b"abc", {"x-amz-checksum-crc32": base64.b64encode(
        zlib.crc32(b"abc").to_bytes(4, "big")).decode()})
    assert error_code(body)[1].endswith("actual checksum Type: crc32")
    assert "Parts" not in c.list_parts(Bucket="rules", Key="k", UploadId=uid)
    bodies = [os.urandom(5 * MiB), b"tail"]
    etags = [c.upload_part(Bucket="rules", Key="k", UploadId=uid, PartNumber=i, Body=b,
                           ChecksumAlgorithm="SHA256")["ETag"] for i, b in enumerate(bodies, 1)]
    lp = c.list_parts(Bucket="rules", Key="k", UploadId=uid)
    assert [p["ChecksumSHA256"] for p in lp["Parts"]] == [sha(b) for b in bodies]
    for path in (f"/rules/k?uploadId={uid}", "/rules?uploads"):   # (boto3 1.35 parses neither)
        body = raw(s3d, "GET", path)[2]
        assert b"<ChecksumAlgorithm>SHA256</ChecksumAlgorithm><ChecksumType>COMPOSITE" \
               b"</ChecksumType>" in body, body
    good = [(1, etags[0], {"SHA256": sha(bodies[0])}), (2, etags[1], {"SHA256": sha(bodies[1])})]
    composite = base64.b64encode(__import__("hashlib").sha256(b"".join(
        base64.b64decode(sha(b)) for b in bodies)).digest()).decode()
    path = f"/rules/k?uploadId={uid}"
    crc = base64.b64encode(zlib.crc32(b"x").to_bytes(4, "big")).decode()
    cases = [
        ([(1, etags[0], {"SHA256": "not base64!"}), good[1]], {},
         ("InvalidArgument", "Invalid Base64 or multiple checksums present in request")),
        ([(1, etags[0], {"SHA256": sha(bodies[0]), "CRC32": crc}), good[1]], {},
         ("InvalidArgument", "Invalid Base64 or multiple checksums present in request")),
        ([(1, etags[0], {"CRC32": crc}), good[1]], {},
         ("BadDigest", "The crc32 you specified for part 1 did not match what we received.")),
        ([good[0], (2, etags[1], {})], {},
         ("InvalidRequest", "The upload was created using a sha256 checksum. The complete "
          "request must include the checksum for each part. It was missing for part 2 in the "
          "request.")),
        ([(1, etags[0], {"SHA256": sha(b"other")}), good[1]], {}, ("InvalidPart", None)),
        (good, {"x-amz-checksum-type": "FULL_OBJECT"},
         ("InvalidRequest", "The upload was created using the COMPOSITE checksum mode. The "
          "complete request must use the same checksum mode.")),
        (good, {"x-amz-checksum-type": "full"},
         ("InvalidRequest", "Value for x-amz-checksum-type header is invalid.")),
        (good, {"x-amz-checksum-sha256": composite + "-2", "x-amz-checksum-crc32": crc},
         ("InvalidRequest", "Expecting a single x-amz-checksum- header. Multiple checksum "
          "Types are not allowed.")),
        (good, {"x-amz-checksum-crc32": crc},
         ("InvalidRequest", "Checksum Type mismatch occurred, expected checksum Type: sha256, "
          "actual checksum Type: crc32")),
        (good, {"x-amz-checksum-sha256": composite + "-2-2"},
         ("InvalidRequest", "Value for x-amz-checksum-sha256 header is invalid.")),
        (good, {"x-amz-checksum-sha256": composite + "--2"},
         ("InvalidRequest", "Value for x-amz-checksum-sha256 header is invalid.")),
        (good, {"x-amz-checksum-sha256": composite + "-0"},
         ("InvalidRequest", "Value for x-amz-checksum-sha256 header is invalid.")),
        (good, {"x-amz-checksum-sha256": "abc-2"},
         ("InvalidRequest", "Value for x-amz-checksum-sha256 header is invalid.")),
        (good, {"x-amz-checksum-sha256": composite + "-3"},
         ("BadDigest", "The sha256 you specified did not match the calculated checksum.")),
        (good, {"x-amz-checksum-sha256": sha(b"") + "-2"},
         ("BadDigest", "The sha256 you specified did not match the calculated checksum.")),
    ]
    for parts, hdrs, (code, msg) in cases:
        status, _, body = raw(s3d, "POST", path, complete_xml(parts), hdrs)
        got = error_code(body)
        assert status == 400 and got[0] == code and (msg is None or got[1] == msg), \
            (parts, hdrs, status, body)
    # the composite without its "-N", and with it: accepted
    status, _, body = raw(s3d, "POST", path, complete_xml(good),
                          {"x-amz-checksum-sha256": composite, "x-amz-checksum-type": "COMPOSITE"})
    assert status == 200, body
    assert b"<ChecksumSHA256>%s-2</ChecksumSHA256><ChecksumType>COMPOSITE</ChecksumType>" % \
        composite.encode() in body
    # an upload without an algorithm ignores the object checksum it is sent
    u2 = c.create_multipart_upload(Bucket="rules", Key="plain")["UploadId"]
    e = c.upload_part(Bucket="rules", Key="plain", UploadId=u2, PartNumber=1, Body=b"p")["ETag"]
    r = c.complete_multipart_upload(Bucket="rules", Key="plain", UploadId=u2,
                                    ChecksumCRC32="AAAAAA==",
                                    MultipartUpload={"Parts": [{"PartNumber": 1, "ETag": e}]})
    assert "ChecksumCRC32" not in r and "ChecksumType" not in r
    assert error_of(lambda: c.create_multipart_upload(
        Bucket="rules", Key="k", ChecksumAlgorithm="MD4"))[:2] == ("InvalidRequest", 400)
