"""Flexible checksums of multipart uploads, and what the S3 API stores of a
body's framing, as AWS S3 does them. Real daemon; raw signed requests
where the bytes on the wire matter, boto3 for the rest.
"""
import base64
import http.client
import zlib

from botocore.auth import SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials

from test_s3 import AK, SK, client, s3d  # noqa: F401  (s3d is a fixture)

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
