"""Parts of objects through the S3 API: GetObject / HeadObject with
?partNumber, and UploadPartCopy (a part copied from an existing object,
whole or a byte range). Real daemon, real boto3.
"""
import hashlib
import os

from test_s3 import client, error_of, s3d  # noqa: F401  (s3d is a fixture)

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
