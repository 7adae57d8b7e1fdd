"""Parts of objects through the S3 API: GetObject / HeadObject with
?partNumber, and UploadPartCopy (a part copied from an existing object,
whole or a byte range). Real daemon, real boto3.
"""
import hashlib
import os

from test_s3 import client, error_of, s3d, shard_files  # noqa: F401  (s3d is a fixture)

MiB = 1024 * 1024


def _mpu(c, bucket, key, parts):
    uid = c.create_multipart_upload(Bucket=bucket, Key=key)["UploadId"]
    done = []
    for i, body in enumerate(parts, 1):
        e = c.upload_part(Bucket=bucket, Key=key, UploadId=uid, PartNumber=i, Body=body)["ETag"]
        done.append({"PartNumber": i, "ETag": e})
    c.complete_multipart_upload(Bucket=bucket, Key=key, UploadId=uid,
                                MultipartUpload={"Parts": done})


def test_get_and_head_by_part_number(s3d):
    c = client(s3d)
    c.create_bucket(Bucket="pnb")
    p = [os.urandom(5 * MiB), os.urandom(5 * MiB + 3), b"last part"]
    _mpu(c, "pnb", "m", p)
    total = sum(map(len, p))
    off = 0
    for i, body in enumerate(p, 1):
        g = c.get_object(Bucket="pnb", Key="m", PartNumber=i)
        assert g["ResponseMetadata"]["HTTPStatusCode"] == 206
        assert g["PartsCount"] == 3 and g["ContentLength"] == len(body)
        assert g["ContentRange"] == f"bytes {off}-{off + len(body) - 1}/{total}"
        assert g["Body"].read() == body
        h = c.head_object(Bucket="pnb", Key="m", PartNumber=i)
        assert h["ContentLength"] == len(body) and h["PartsCount"] == 3
        assert h["ResponseMetadata"]["HTTPStatusCode"] == 206
        off += len(body)
    code, status, _ = error_of(lambda: c.get_object(Bucket="pnb", Key="m", PartNumber=4))
    assert (code, status) == ("InvalidPartNumber", 416)
    # a plain PUT is one part: number 1 is the whole object, 2 does not exist
    c.put_object(Bucket="pnb", Key="single", Body=b"whole object")
    g = c.get_object(Bucket="pnb", Key="single", PartNumber=1)
    assert g["ResponseMetadata"]["HTTPStatusCode"] == 200 and "PartsCount" not in g
    assert g["Body"].read() == b"whole object"
    assert error_of(lambda: c.head_object(Bucket="pnb", Key="single", PartNumber=2))[1] == 416
    # bad numbers, and a Range with a part number
    for bad in (0, 10001):
        code, status, _ = error_of(lambda: c.get_object(Bucket="pnb", Key="m", PartNumber=bad))
        assert (code, status) == ("InvalidArgument", 400)
    code, status, _ = error_of(lambda: c.get_object(Bucket="pnb", Key="m", PartNumber=1,
                                                    Range="bytes=0-1"))
    assert (code, status) == ("InvalidRequest", 400)
    assert error_of(lambda: c.get_object(Bucket="pnb", Key="nokey", PartNumber=1))[0] == \
        "NoSuchKey"
    # the object's checksum covers the whole object, never a part
    c.put_object(Bucket="pnb", Key="ck", Body=b"abc", ChecksumAlgorithm="SHA256")
    g = c.get_object(Bucket="pnb", Key="ck", PartNumber=1, ChecksumMode="ENABLED")
    assert g["ChecksumSHA256"] and g["Body"].read() == b"abc"
    md5s = b"".join(hashlib.md5(b).digest() for b in p)
    assert c.head_object(Bucket="pnb", Key="m")["ETag"] == \
        '"%s-3"' % hashlib.md5(md5s).hexdigest()


def test_complete_again_answers_like_the_first_time(s3d):
    """A Complete repeated after it succeeded (its answer lost, or Flink's
    S3 sink committing a part file again on a replayed checkpoint) gets the
    same result, as from S3; one with other parts, or after the key was
    written over, or of an aborted upload, is NoSuchUpload."""
    c = client(s3d)
    c.create_bucket(Bucket="again")
    uid = c.create_multipart_upload(Bucket="again", Key="k", ChecksumAlgorithm="CRC32")["UploadId"]
    bodies = [os.urandom(5 * MiB), b"tail"]
    parts = []
    for i, b in enumerate(bodies, 1):
        r = c.upload_part(Bucket="again", Key="k", UploadId=uid, PartNumber=i, Body=b,
                          ChecksumAlgorithm="CRC32")
        parts.append({"PartNumber": i, "ETag": r["ETag"], "ChecksumCRC32": r["ChecksumCRC32"]})

    def complete(lst, **kw):
        return c.complete_multipart_upload(Bucket="again", Key="k", UploadId=uid,
                                           MultipartUpload={"Parts": lst}, **kw)
    first = complete(parts)
    for _ in range(2):
        again = complete(parts)
        assert again["ResponseMetadata"]["HTTPStatusCode"] == 200
        for f in ("ETag", "Bucket", "Key", "Location", "ChecksumCRC32"):
            assert again[f] == first[f], f
    assert complete(parts, IfNoneMatch="*")["ETag"] == first["ETag"]   # the same upload
    assert c.get_object(Bucket="again", Key="k")["Body"].read() == b"".join(bodies)
    assert error_of(lambda: complete(parts[:1]))[0] == "NoSuchUpload"
    other = dict(parts[1], ETag='"' + "0" * 32 + '"')
    assert error_of(lambda: complete([parts[0], other]))[0] == "NoSuchUpload"
    assert "Uploads" not in c.list_multipart_uploads(Bucket="again")
    c.put_object(Bucket="again", Key="k", Body=b"written over")
    assert error_of(lambda: complete(parts))[0] == "NoSuchUpload"
    assert c.get_object(Bucket="again", Key="k")["Body"].read() == b"written over"
    # versioned: the version the upload made answers while it is the latest
    c.put_bucket_versioning(Bucket="again", VersioningConfiguration={"Status": "Enabled"})
    u2 = c.create_multipart_upload(Bucket="again", Key="v")["UploadId"]
    e = c.upload_part(Bucket="again", Key="v", UploadId=u2, PartNumber=1, Body=b"v1")["ETag"]
    lst = {"Parts": [{"PartNumber": 1, "ETag": e}]}
    r1 = c.complete_multipart_upload(Bucket="again", Key="v", UploadId=u2, MultipartUpload=lst)
    r2 = c.complete_multipart_upload(Bucket="again", Key="v", UploadId=u2, MultipartUpload=lst)
    assert r2["VersionId"] == r1["VersionId"] and r2["ETag"] == r1["ETag"]
    assert len(c.list_object_versions(Bucket="again", Prefix="v")["Versions"]) == 1
    # an aborted upload stays gone
    u3 = c.create_multipart_upload(Bucket="again", Key="gone")["UploadId"]
    e = c.upload_part(Bucket="again", Key="gone", UploadId=u3, PartNumber=1, Body=b"g")["ETag"]
    c.abort_multipart_upload(Bucket="again", Key="gone", UploadId=u3)
    assert error_of(lambda: c.complete_multipart_upload(
        Bucket="again", Key="gone", UploadId=u3,
        MultipartUpload={"Parts": [{"PartNumber": 1, "ETag": e}]}))[0] == "NoSuchUpload"


def test_upload_part_copy(s3d):
    c = client(s3d)
    c.create_bucket(Bucket="srcb")
    c.create_bucket(Bucket="dstb")
    src = os.urandom(12 * MiB + 7)
    c.put_object(Bucket="srcb", Key="big/src", Body=src)
    c.put_object(Bucket="srcb", Key="small", Body=b"tail bytes")
    uid = c.create_multipart_upload(Bucket="dstb", Key="assembled")["UploadId"]
    # part 1: a range of the big object, part 2: the whole small one
    lo, hi = 3 * MiB, 8 * MiB - 1
    r1 = c.upload_part_copy(Bucket="dstb", Key="assembled", UploadId=uid, PartNumber=1,
                            CopySource={"Bucket": "srcb", "Key": "big/src"},
                            CopySourceRange=f"bytes={lo}-{hi}")["CopyPartResult"]
    assert r1["ETag"] == '"%s"' % hashlib.md5(src[lo:hi + 1]).hexdigest()
    r2 = c.upload_part_copy(Bucket="dstb", Key="assembled", UploadId=uid, PartNumber=2,
                            CopySource="srcb/small")["CopyPartResult"]
    parts = c.list_parts(Bucket="dstb", Key="assembled", UploadId=uid)["Parts"]
    assert [(p["PartNumber"], p["Size"]) for p in parts] == [(1, 5 * MiB), (2, 10)]
    c.complete_multipart_upload(Bucket="dstb", Key="assembled", UploadId=uid,
                                MultipartUpload={"Parts": [
                                    {"PartNumber": 1, "ETag": r1["ETag"]},
                                    {"PartNumber": 2, "ETag": r2["ETag"]}]})
    got = c.get_object(Bucket="dstb", Key="assembled")["Body"].read()
    assert got == src[lo:hi + 1] + b"tail bytes"

    # errors: each stores nothing
    uid = c.create_multipart_upload(Bucket="dstb", Key="e")["UploadId"]

    def upc(**kw):
        args = {"Bucket": "dstb", "Key": "e", "UploadId": uid, "PartNumber": 1,
                "CopySource": "srcb/big/src"}
        args.update(kw)
        return c.upload_part_copy(**args)
    for bad in ("bytes=5-", "bytes=9-3", "items=0-1", "bytes=-5", "bytes=0-1,4-5"):
        assert error_of(lambda: upc(CopySourceRange=bad))[:2] == ("InvalidArgument", 400), bad
    assert error_of(lambda: upc(CopySourceRange=f"bytes=0-{len(src)}"))[:2] == \
        ("InvalidRange", 416)
    assert error_of(lambda: upc(CopySource="srcb/nope"))[0] == "NoSuchKey"
    assert error_of(lambda: upc(CopySource="nobucket/k"))[0] == "NoSuchBucket"
    assert error_of(lambda: upc(UploadId="0" * 32))[0] == "NoSuchUpload"
    assert error_of(lambda: upc(CopySourceIfMatch='"0000"'))[:2] == ("PreconditionFailed", 412)
    assert error_of(lambda: upc(PartNumber=10001))[0] == "InvalidArgument"
    assert "Parts" not in c.list_parts(Bucket="dstb", Key="e", UploadId=uid)
    c.abort_multipart_upload(Bucket="dstb", Key="e", UploadId=uid)


def test_upload_part_copy_into_an_upload_with_a_checksum(s3d):
    import base64
    import zlib
    c = client(s3d)
    c.create_bucket(Bucket="cksb")
    body = os.urandom(6 * MiB)
    c.put_object(Bucket="cksb", Key="src", Body=body)
    uid = c.create_multipart_upload(Bucket="cksb", Key="dst",
                                    ChecksumAlgorithm="CRC32")["UploadId"]
    r = c.upload_part_copy(Bucket="cksb", Key="dst", UploadId=uid, PartNumber=1,
                           CopySource="cksb/src", CopySourceRange="bytes=0-5242879")
    res = r["CopyPartResult"]
    want = base64.b64encode(zlib.crc32(body[:5 * MiB]).to_bytes(4, "big")).decode()
    assert res["ChecksumCRC32"] == want
    p2 = c.upload_part(Bucket="cksb", Key="dst", UploadId=uid, PartNumber=2,
                       Body=body[5 * MiB:], ChecksumAlgorithm="CRC32")
    c.complete_multipart_upload(Bucket="cksb", Key="dst", UploadId=uid, MultipartUpload={
        "Parts": [{"PartNumber": 1, "ETag": res["ETag"], "ChecksumCRC32": want},
                  {"PartNumber": 2, "ETag": p2["ETag"], "ChecksumCRC32": p2["ChecksumCRC32"]}]})
    assert c.get_object(Bucket="cksb", Key="dst")["Body"].read() == body


def test_incomplete_uploads_expire_while_serving(make_daemon, tmp_path):
    """multipart_expiry_s: an upload older than it is removed by the
    running daemon (parts and record), a younger one stays."""
    import time
    from test_s3 import AK, SK
    d = make_daemon(args=["--mode", "s3", "--multipart-expiry-s", "2"],
                    env={"OPENLAKE_ACCESS_KEY": AK, "OPENLAKE_SECRET_KEY": SK})
    c = client(d)
    c.create_bucket(Bucket="expb")
    old = c.create_multipart_upload(Bucket="expb", Key="old")["UploadId"]
    c.upload_part(Bucket="expb", Key="old", UploadId=old, PartNumber=1, Body=b"x" * 1000)
    uploads = d.data / ".openlake" / "buckets" / "expb" / "uploads"
    assert any(uploads.rglob("upload"))
    deadline = time.time() + 60
    while time.time() < deadline:
        ups = c.list_multipart_uploads(Bucket="expb").get("Uploads", [])
        if not ups:
            break
        time.sleep(0.2)
    assert c.list_multipart_uploads(Bucket="expb").get("Uploads", []) == []
    assert error_of(lambda: c.upload_part(Bucket="expb", Key="old", UploadId=old,
                                          PartNumber=2, Body=b"y"))[0] == "NoSuchUpload"
    assert not any(uploads.rglob("upload")) and not any(uploads.rglob("part.*"))
    young = c.create_multipart_upload(Bucket="expb", Key="young")["UploadId"]
    assert [u["UploadId"] for u in c.list_multipart_uploads(Bucket="expb")["Uploads"]] == \
        [young]
    assert "removed" in d.stderr()


def test_inline_threshold_setting(make_daemon, tmp_path):
    """inline_max_bytes: objects up to it live in their metadata file (no
    data directory); 0 turns that off."""
    from test_s3 import AK, SK
    for limit, small_inline in (("4096", True), ("0", False)):
        d = make_daemon(args=["--mode", "s3", "--inline-max-bytes", limit],
                        env={"OPENLAKE_ACCESS_KEY": AK, "OPENLAKE_SECRET_KEY": SK})
        c = client(d)
        c.create_bucket(Bucket="inl")
        c.put_object(Bucket="inl", Key="small", Body=b"s" * 4096)
        c.put_object(Bucket="inl", Key="big", Body=b"b" * 4097)
        objs = d.data / ".openlake" / "buckets" / "inl" / "objects"
        parts = sorted(p.stat().st_size for p in shard_files(objs))
        assert len(parts) == (1 if small_inline else 2), (limit, parts)
        assert c.get_object(Bucket="inl", Key="small")["Body"].read() == b"s" * 4096
        assert c.get_object(Bucket="inl", Key="big")["Body"].read() == b"b" * 4097
        d.stop()
