"""500 InternalError is the server's own failure, never the client's: a
battery of malformed but plausible requests at every S3 handler gets 4xx
answers (or 501 for what is not implemented), and every 500 the daemon
does answer is in its log with the request id the client got, and a cause.
Raw SigV4-signed requests, so every byte is the test's.
"""
import base64
import hashlib
import re
import zlib

import pytest

from test_s3 import AK, SK, client, s3d  # noqa: F401  (s3d is a fixture)
from test_s3_checksums import raw

MiB = 1024 * 1024


def md5_b64(b):
    return base64.b64encode(hashlib.md5(b).digest()).decode()


def crc32_b64(b):
    return base64.b64encode(zlib.crc32(b).to_bytes(4, "big")).decode()


def xml(tag, inner=b""):
    """<tag>inner</tag> as bytes; inner bytes or str."""
    inner = inner.encode() if isinstance(inner, str) else inner
    return b"<%s>%s</%s>" % (tag.encode(), inner, tag.encode())


def battery(uid, uid_sha, etag1, vid):
    """(method, path, headers, body) of client mistakes, handler by handler."""
    up = f"uploadId={uid}"
    ups = f"uploadId={uid_sha}"
    cmu = "CompleteMultipartUpload"
    part = "<Part><PartNumber>%s</PartNumber><ETag>%s</ETag></Part>"
    many = "".join(part % (i, etag1) for i in range(1, 10002))
    tags11 = "".join("<Tag><Key>k%d</Key><Value>v</Value></Tag>" % i for i in range(11))
    delete = "<Delete>%s</Delete>"
    return [
        # buckets
        ("PUT", "/newbkt", {}, b"<CreateBucketConfiguration><LocationConstraint>mars"
                               b"</LocationConstraint></CreateBucketConfiguration>"),
        ("PUT", "/newbkt2", {}, b"<CreateBucketConfiguration><Location"),
        ("PUT", "/newbkt3", {}, b"\xff\xfe<x/>"),
        ("PUT", "/Bad_Bucket", {}, b""),
        ("PUT", "/ab", {}, b""),
        ("PUT", "/192.168.1.1", {}, b""),
        ("PUT", "/bat", {}, b""),                                   # already owned
        ("DELETE", "/nobucket", {}, b""),
        ("DELETE", "/bat", {}, b""),                                # not empty
        ("HEAD", "/nobucket", {}, b""),
        ("GET", "/nobucket?location", {}, b""),
        ("GET", "/nobucket?versioning", {}, b""),
        ("PUT", "/bat?versioning", {}, b""),
        ("PUT", "/bat?versioning", {}, b"<VersioningConfiguration>"),
        ("PUT", "/bat?versioning", {}, xml("VersioningConfiguration", xml("Status", "Maybe"))),
        ("PUT", "/bat?versioning", {}, xml("VersioningConfiguration", xml("MfaDelete", "Enabled") +
                                           xml("Status", "Enabled"))),
        ("PUT", "/bat?versioning", {}, b"<a>" * 5000 + b"</a>" * 5000),
        ("PUT", "/nobucket?versioning", {}, xml("VersioningConfiguration",
                                                xml("Status", "Enabled"))),
        # listings
        ("GET", "/bat?list-type=2&max-keys=-1", {}, b""),
        ("GET", "/bat?list-type=2&max-keys=abc", {}, b""),
        ("GET", "/bat?list-type=2&max-keys=99999999999999999999999", {}, b""),
        ("GET", "/bat?list-type=2&continuation-token=%21%21garbage", {}, b""),
        ("GET", "/bat?list-type=2&start-after=%FF%FE", {}, b""),
        ("GET", "/bat?list-type=2&encoding-type=base64", {}, b""),
        ("GET", "/bat?list-type=3", {}, b""),
        ("GET", "/bat?list-type=2&prefix=" + "p" * 2000, {}, b""),
        ("GET", "/bat?max-keys=0&delimiter=" + "/" * 1100, {}, b""),
        ("GET", "/nobucket?list-type=2", {}, b""),
        ("GET", "/bat?versions&version-id-marker=zzz", {}, b""),
        ("GET", "/bat?versions&key-marker=k&version-id-marker=" + "0" * 32, {}, b""),
        ("GET", "/bat?versions&max-keys=-5", {}, b""),
        ("GET", "/bat?uploads&max-uploads=-1&upload-id-marker=zz", {}, b""),
        ("GET", "/bat?uploads&key-marker=%FF&upload-id-marker=" + "f" * 32, {}, b""),
        ("GET", "/bat?uploads&max-uploads=abc&delimiter=" + "x" * 1100, {}, b""),
        # DeleteObjects
        ("POST", "/bat?delete", {}, (delete % "<Object><Key>a</Key></Object>").encode()),
        ("POST", "/bat?delete", {"Content-MD5": "AAAA"}, b"<Delete/>"),
        ("POST", "/bat?delete", {"Content-MD5": md5_b64(b"other")}, b"<Delete/>"),
        ("POST", "/bat?delete", {"Content-MD5": md5_b64(b"<Delete")}, b"<Delete"),
        ("POST", "/bat?delete", {"Content-MD5": md5_b64(b"<Delete/>")}, b"<Delete/>"),
        ("POST", "/bat?delete", {"x-amz-checksum-crc32": crc32_b64(b"<Delete><Object/></Delete>")},
         b"<Delete><Object/></Delete>"),
        *[("POST", "/bat?delete", {"Content-MD5": md5_b64(b)}, b) for b in (
            (delete % ("<Object><Key>k</Key></Object>" * 1001)).encode(),
            (delete % "<Object><Key>k</Key><VersionId>nope</VersionId></Object>").encode(),
            (delete % ("<Object><Key>%s</Key></Object>" % ("k" * 2000))).encode(),
            (delete % "<Quiet>maybe</Quiet><Object><Key>k</Key></Object>").encode(),
            (delete % "<Object><Key></Key></Object>").encode(),
            b"<Other><Object><Key>k</Key></Object></Other>")],
        # PutObject
        ("PUT", "/bat/k", {"Content-MD5": "not base64"}, b"body"),
        ("PUT", "/bat/k", {"Content-MD5": md5_b64(b"other")}, b"body"),
        ("PUT", "/bat/k", {"x-amz-checksum-crc32": "AAAA"}, b"body"),
        ("PUT", "/bat/k", {"x-amz-checksum-crc32": crc32_b64(b"other")}, b"body"),
        ("PUT", "/bat/k", {"x-amz-checksum-crc32": crc32_b64(b"body"),
                           "x-amz-checksum-sha256": "x"}, b"body"),
        ("PUT", "/bat/k", {"x-amz-checksum-sha256": crc32_b64(b"body") + "-1"}, b"body"),
        ("PUT", "/bat/k", {"x-amz-trailer": "x-amz-checksum-crc32"}, b"body"),
        ("PUT", "/bat/k", {"x-amz-trailer": "x-amz-bogus"}, b"body"),
        ("PUT", "/bat/k", {"x-amz-storage-class": "GLACIER"}, b"body"),
        ("PUT", "/bat/k", {"x-amz-tagging": "a=b&a=c"}, b"body"),
        ("PUT", "/bat/k", {"x-amz-tagging": "%ZZ=1"}, b"body"),
        ("PUT", "/bat/k", {"x-amz-tagging": "aws:x=1"}, b"body"),
        ("PUT", "/bat/k", {"x-amz-meta-big": "v" * 3000}, b"body"),
        ("PUT", "/bat/k", {"x-amz-meta-a": "1", "X-Amz-Meta-A": "2"}, b"body"),
        ("PUT", "/bat/k", {"If-None-Match": '"abc"'}, b"body"),
        ("PUT", "/bat/k", {"If-None-Match": "*", "If-Match": '"abc"'}, b"body"),
        ("PUT", "/bat/obj", {"If-None-Match": "*"}, b"body"),
        ("PUT", "/bat/nokey", {"If-Match": '"abc"'}, b"body"),
        ("PUT", "/bat/k", {"Content-Encoding": "aws-chunked"}, b"body"),
        ("PUT", "/bat/" + "k" * 1100, {}, b"body"),
        ("PUT", "/nobucket/k", {}, b"body"),
        ("PUT", "/bat/k", {"Expires": "x" * 3000}, b"body"),
        # CopyObject
        ("PUT", "/bat/c", {"x-amz-copy-source": "/bat/nokey"}, b""),
        ("PUT", "/bat/c", {"x-amz-copy-source": "/bat"}, b""),
        ("PUT", "/bat/c", {"x-amz-copy-source": "bat"}, b""),
        ("PUT", "/bat/c", {"x-amz-copy-source": "/bat/%ZZ"}, b""),
        ("PUT", "/bat/c", {"x-amz-copy-source": "/nobucket/obj"}, b""),
        ("PUT", "/bat/c", {"x-amz-copy-source": "/bat/obj?versionId=bad"}, b""),
        ("PUT", "/bat/c", {"x-amz-copy-source": "/bat/obj?versionId=" + "0" * 32}, b""),
        ("PUT", "/bat/obj", {"x-amz-copy-source": "/bat/obj"}, b""),
        ("PUT", "/bat/c", {"x-amz-copy-source": "/bat/obj", "x-amz-metadata-directive": "BOGUS"},
         b""),
        ("PUT", "/bat/c", {"x-amz-copy-source": "/bat/obj", "x-amz-copy-source-if-match": '"x"'},
         b""),
        ("PUT", "/bat/c", {"x-amz-copy-source": "/bat/obj",
                           "x-amz-copy-source-if-modified-since": "yesterday"}, b""),
        ("PUT", "/bat/c", {"x-amz-copy-source": "/bat/obj",
                           "x-amz-copy-source-if-unmodified-since": "Mon, 01 Jan 1990 00:00:00 GMT"},
         b""),
        ("PUT", "/bat/c", {"x-amz-copy-source": "/bat/obj", "x-amz-storage-class": "ICE"}, b""),
        ("PUT", "/bat/c", {"x-amz-copy-source": "/bat/obj"}, b"a body on a copy"),
        # GetObject / HeadObject
        *[(m, "/bat/obj" + q, h, b"") for m in ("GET", "HEAD") for q, h in (
            ("", {"Range": "bytes=abc"}), ("", {"Range": "bytes=100-50"}),
            ("", {"Range": "bytes=1000-"}), ("", {"Range": "bytes=-0"}),
            ("", {"Range": "bytes=0-1,5-6"}), ("?partNumber=0", {}), ("?partNumber=abc", {}),
            ("?partNumber=10001", {}), ("?partNumber=2", {}), ("?partNumber=1", {"Range": "bytes=0-1"}),
            ("?versionId=bad", {}), ("?versionId=" + "0" * 32, {}),
            ("", {"If-Modified-Since": "garbage"}), ("", {"If-Match": '"nope"'}),
            ("", {"If-None-Match": "*"}), ("", {"If-Unmodified-Since": "Mon, 01 Jan 1990 00:00:00 GMT"}),
            ("?response-content-type=a%09b", {}), ("?response-expires=" + "x" * 3000, {}),
            ("", {"x-amz-checksum-mode": "ENABLED", "Range": "bytes=0-3"}))],
        ("GET", "/bat/nokey", {}, b""),
        ("GET", "/nobucket/obj", {}, b""),
        ("HEAD", "/bat/nokey?partNumber=1", {}, b""),
        # DeleteObject
        ("DELETE", "/bat/obj?versionId=garbage", {}, b""),
        ("DELETE", "/bat/nokey?versionId=" + "0" * 32, {}, b""),
        ("DELETE", "/nobucket/k", {}, b""),
        # multipart
        ("POST", "/bat/m?uploads", {"x-amz-checksum-algorithm": "MD4"}, b""),
        ("POST", "/bat/m?uploads", {"x-amz-checksum-algorithm": "SHA256",
                                    "x-amz-checksum-type": "FULL_OBJECT"}, b""),
        ("POST", "/bat/m?uploads", {"x-amz-checksum-type": "COMPOSITE"}, b""),
        ("POST", "/bat/m?uploads", {"x-amz-tagging": "a=1&a=2"}, b""),
        ("POST", "/bat/m?uploads", {"x-amz-storage-class": "DEEP"}, b""),
        ("POST", "/nobucket/m?uploads", {}, b""),
        ("PUT", "/bat/m?partNumber=1&uploadId=zz", {}, b"p"),
        ("PUT", "/bat/m?partNumber=0&" + up, {}, b"p"),
        ("PUT", "/bat/m?partNumber=10001&" + up, {}, b"p"),
        ("PUT", "/bat/m?partNumber=abc&" + up, {}, b"p"),
        ("PUT", "/bat/other?partNumber=1&" + up, {}, b"p"),
        ("PUT", "/bat/m?partNumber=1&" + up, {"x-amz-checksum-crc32": crc32_b64(b"q")}, b"p"),
        ("PUT", "/bat/m?partNumber=2&" + ups, {}, b"p"),
        ("PUT", "/bat/m?partNumber=2&" + ups, {"x-amz-checksum-sha256": "bad"}, b"p"),
        ("PUT", "/bat/m?partNumber=2&" + up, {"x-amz-copy-source": "/bat/obj",
                                              "x-amz-copy-source-range": "bytes=5-1"}, b""),
        ("PUT", "/bat/m?partNumber=2&" + up, {"x-amz-copy-source": "/bat/obj",
                                              "x-amz-copy-source-range": "bytes=0-99999999"}, b""),
        ("PUT", "/bat/m?partNumber=2&" + up, {"x-amz-copy-source": "/bat/obj",
                                              "x-amz-copy-source-range": "lines=1-2"}, b""),
        ("PUT", "/bat/m?partNumber=2&" + up, {"x-amz-copy-source": "/bat/nokey"}, b""),
        ("PUT", "/bat/m?partNumber=2&uploadId=" + "0" * 32, {"x-amz-copy-source": "/bat/obj"},
         b""),
        ("GET", "/bat/m?" + up + "&max-parts=-1&part-number-marker=abc", {}, b""),
        *[("POST", "/bat/m?" + up, {}, b) for b in (
            b"", b"<CompleteMultipartUpload/>", b"<CompleteMultipartUpload>",
            xml(cmu, "<Part></Part>"), xml(cmu, part % ("0", etag1)),
            xml(cmu, part % ("-1", etag1)), xml(cmu, part % ("99999", etag1)),
            xml(cmu, part % ("abc", etag1)), xml(cmu, part % ("1", "garbage")),
            xml(cmu, part % ("2", etag1) + part % ("1", etag1)),
            xml(cmu, part % ("1", etag1) + part % ("1", etag1)),
            xml(cmu, part % ("1", '"%s"' % ("0" * 32))),
            xml(cmu, many), b"<CompleteMultipartUpload>" + b"x" * (3 * MiB),
            b"not xml at all", xml("Other", part % ("1", etag1)))],
        ("POST", "/bat/m?" + up, {"x-amz-checksum-sha256": "x-1"}, xml(cmu, part % ("1", etag1))),
        ("POST", "/bat/m?" + ups, {}, xml(cmu, part % ("1", etag1))),
        ("POST", "/bat/m?" + ups, {}, xml(cmu, "<Part><PartNumber>1</PartNumber><ETag>%s</ETag>"
                                              "<ChecksumSHA256>!!</ChecksumSHA256></Part>" % etag1)),
        ("POST", "/bat/m?" + ups, {"x-amz-checksum-type": "FULL_OBJECT"},
         xml(cmu, part % ("1", etag1))),
        ("POST", "/bat/m?uploadId=" + "0" * 32, {}, xml(cmu, part % ("1", etag1))),
        ("POST", "/bat/m?uploadId=zz", {}, xml(cmu, part % ("1", etag1))),
        ("DELETE", "/bat/m?uploadId=" + "0" * 32, {}, b""),
        ("DELETE", "/bat/m?uploadId=nothex", {}, b""),
        ("GET", "/bat/m?uploadId=" + "1" * 32, {}, b""),
        # tagging
        *[("PUT", "/bat/obj?tagging", {"Content-MD5": md5_b64(b)}, b) for b in (
            b"", b"<Tagging>", xml("Tagging", xml("TagSet", tags11)),
            xml("Tagging", xml("TagSet", "<Tag><Key>a</Key><Value>1</Value></Tag>" * 2)),
            xml("Tagging", xml("TagSet", "<Tag><Key>aws:x</Key><Value>1</Value></Tag>")),
            xml("Tagging", xml("TagSet", "<Tag><Key></Key><Value>1</Value></Tag>")),
            xml("Tagging", xml("TagSet", "<Tag><Key>%s</Key><Value>1</Value></Tag>" % ("k" * 200))),
            b"<Tagging><TagSet><Tag><Key>a</Key></Tag></TagSet></Tagging>")],
        ("PUT", "/bat/obj?tagging", {}, xml("Tagging", xml("TagSet"))),
        ("PUT", "/bat/nokey?tagging", {}, xml("Tagging", xml("TagSet"))),
        ("GET", "/bat/nokey?tagging", {}, b""),
        ("GET", "/bat/obj?tagging&versionId=bad", {}, b""),
        ("DELETE", "/bat/nokey?tagging", {}, b""),
        ("DELETE", f"/batv/obj?tagging&versionId={vid}", {}, b""),
        # what is not implemented, and odd methods
        ("GET", "/bat?acl", {}, b""),
        ("PUT", "/bat?policy", {}, b"{}"),
        ("GET", "/bat/obj?torrent", {}, b""),
        ("PATCH", "/bat/obj", {}, b"x"),
        ("OPTIONS", "/bat/obj", {}, b""),
        ("POST", "/bat/obj", {}, b"x"),
        ("POST", "/bat", {}, b"x"),
    ]


def test_client_mistakes_never_answer_500(s3d):
    c = client(s3d)
    c.create_bucket(Bucket="bat")
    c.put_object(Bucket="bat", Key="obj", Body=b"o" * 100)
    c.create_bucket(Bucket="batv")
    c.put_bucket_versioning(Bucket="batv", VersioningConfiguration={"Status": "Enabled"})
    c.put_object(Bucket="batv", Key="obj", Body=b"v1")
    vid = c.delete_object(Bucket="batv", Key="obj")["VersionId"]   # a delete marker
    uid = c.create_multipart_upload(Bucket="bat", Key="m")["UploadId"]
    etag1 = c.upload_part(Bucket="bat", Key="m", UploadId=uid, PartNumber=1,
                          Body=b"part one")["ETag"]
    uid_sha = c.create_multipart_upload(Bucket="bat", Key="m",
                                        ChecksumAlgorithm="SHA256")["UploadId"]
    c.upload_part(Bucket="bat", Key="m", UploadId=uid_sha, PartNumber=1, Body=b"part one",
                  ChecksumAlgorithm="SHA256")
    bad = []
    for method, path, headers, body in battery(uid, uid_sha, etag1, vid):
        status, h, out = raw(s3d, method, path, body, headers)
        assert re.fullmatch(r"[0-9A-F]{16}", h.get("x-amz-request-id", "")), (method, path)
        if status >= 500 and status != 501:
            bad.append((status, method, path[:80], sorted(headers), body[:60], out[:300]))
    assert not bad, "\n".join(map(str, bad))
    assert "InternalError" not in s3d.stderr()
    # the daemon still serves, the data is as it was
    assert c.get_object(Bucket="bat", Key="obj")["Body"].read() == b"o" * 100


def test_every_500_is_logged_with_its_request_id(make_daemon, s3d):
    """With http.debug_endpoints a signed request may ask for an
    InternalError: it takes the path every 500 takes, and the log line
    carries the x-amz-request-id the client got, the request and a cause;
    the client gets S3's message, not the cause. Without the setting the
    header means nothing."""
    d = make_daemon(args=["--mode", "s3", "--http.debug-endpoints", "true"],
                    env={"OPENLAKE_ACCESS_KEY": AK, "OPENLAKE_SECRET_KEY": SK})
    client(d).create_bucket(Bucket="dbg")
    ids = []
    for method, path in (("GET", "/dbg/some/key"), ("PUT", "/dbg/k2"), ("HEAD", "/dbg")):
        status, h, body = raw(d, method, path, b"x" if method == "PUT" else b"",
                              {"x-openlake-debug-internal-error": "1"})
        assert status == 500, (method, body)
        rid = h["x-amz-request-id"]
        if method != "HEAD":
            assert b"<Code>InternalError</Code>" in body and rid.encode() in body
            assert b"x-openlake-debug" not in body        # the cause stays in the log
        ids.append((rid, method, path))
    log = d.stderr()
    for rid, method, path in ids:
        line = [ln for ln in log.splitlines() if rid in ln]
        assert len(line) == 1, (rid, log)
        assert re.search(r"ERROR .*S3 request %s: 500 InternalError for %s %s: asked for by "
                         r"x-openlake-debug-internal-error .*\(src/s3/server\.c:\d+\)" %
                         (rid, method, re.escape(path)), line[0]), line[0]
    status, h, _ = raw(s3d, "GET", "/nobucket/k", b"", {"x-openlake-debug-internal-error": "1"})
    assert status == 404 and "InternalError" not in s3d.stderr()


@pytest.mark.parametrize("what", ["put", "create"])
def test_store_failures_are_not_internal_errors(make_daemon, tmp_path, what):
    """Three drives of four unable to hold the bucket's objects and uploads
    (their directories replaced by files): the write fails on the store,
    which is 503 ServiceUnavailable (retryable), not a 500."""
    import shutil
    from test_s3 import multi_drive
    d, drives = multi_drive(make_daemon, tmp_path)
    c = client(d)
    c.create_bucket(Bucket="sfb")
    for drv in drives[:3]:
        for sub in ("objects", "uploads"):
            p = drv / ".openlake" / "buckets" / "sfb" / sub
            if p.exists():
                shutil.rmtree(p)
            p.write_bytes(b"not a directory")
    if what == "put":
        status, _, body = raw(d, "PUT", "/sfb/k", b"body")
    else:
        status, _, body = raw(d, "POST", "/sfb/m?uploads")
    assert (status, error_code(body)) == (503, "ServiceUnavailable"), body
    assert "InternalError" not in d.stderr()


def error_code(body):
    m = re.search(rb"<Code>([^<]*)</Code>", body)
    return m.group(1).decode() if m else None
