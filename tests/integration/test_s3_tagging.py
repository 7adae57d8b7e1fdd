"""Object tags through the S3 API: x-amz-tagging on PUT, GetObjectTagging,
PutObjectTagging and DeleteObjectTagging (current version and by
versionId), their limits and errors. Real daemon, real boto3.
"""
import os

from test_s3 import client, error_of, multi_drive, s3d  # noqa: F401


def tags_of(c, bucket, key, **kw):
    r = c.get_object_tagging(Bucket=bucket, Key=key, **kw)
    return {t["Key"]: t["Value"] for t in r["TagSet"]}


def tagset(d):
    return {"TagSet": [{"Key": k, "Value": v} for k, v in d.items()]}


def test_put_get_delete_object_tagging(s3d):
    c = client(s3d)
    c.create_bucket(Bucket="tagb")
    body = os.urandom(300000)
    c.put_object(Bucket="tagb", Key="obj", Body=body, Tagging="a=1&b=two")
    assert tags_of(c, "tagb", "obj") == {"a": "1", "b": "two"}
    want = {"project": "open lake", "ünïcödé": "välue/with=&?#%+", "empty": ""}
    c.put_object_tagging(Bucket="tagb", Key="obj", Tagging=tagset(want))
    assert tags_of(c, "tagb", "obj") == want
    h = c.head_object(Bucket="tagb", Key="obj")
    assert h["ResponseMetadata"]["HTTPHeaders"]["x-amz-tagging-count"] == "3"
    # the object itself is untouched
    g = c.get_object(Bucket="tagb", Key="obj")
    assert g["Body"].read() == body and g["ETag"] == h["ETag"]
    r = c.delete_object_tagging(Bucket="tagb", Key="obj")
    assert r["ResponseMetadata"]["HTTPStatusCode"] == 204
    assert tags_of(c, "tagb", "obj") == {}
    assert "x-amz-tagging-count" not in \
        c.head_object(Bucket="tagb", Key="obj")["ResponseMetadata"]["HTTPHeaders"]
    # tags survive a restart (they are in the object's metadata on the drives)
    c.put_object_tagging(Bucket="tagb", Key="obj", Tagging=tagset({"k": "v"}))
    s3d.stop()
    s3d.start()
    c = client(s3d)
    assert tags_of(c, "tagb", "obj") == {"k": "v"}
    assert c.get_object(Bucket="tagb", Key="obj")["Body"].read() == body
    # a small (inline) object and a multipart one too
    c.put_object(Bucket="tagb", Key="tiny", Body=b"x")
    c.put_object_tagging(Bucket="tagb", Key="tiny", Tagging=tagset({"t": "1"}))
    assert tags_of(c, "tagb", "tiny") == {"t": "1"}
    assert c.get_object(Bucket="tagb", Key="tiny")["Body"].read() == b"x"


def test_object_tagging_errors(s3d):
    c = client(s3d)
    c.create_bucket(Bucket="tagc")
    c.put_object(Bucket="tagc", Key="obj", Body=b"data", Tagging="keep=me")

    def put(ts, key="obj", **kw):
        return c.put_object_tagging(Bucket="tagc", Key=key, Tagging=ts, **kw)
    eleven = {f"k{i}": "v" for i in range(11)}
    for bad in (tagset(eleven), tagset({"k" * 129: "v"}), tagset({"k": "v" * 257}),
                tagset({"aws:x": "v"}),
                {"TagSet": [{"Key": "d", "Value": "1"}, {"Key": "d", "Value": "2"}]}):
        assert error_of(lambda: put(bad))[:2] == ("InvalidTag", 400), bad
    assert tags_of(c, "tagc", "obj") == {"keep": "me"}      # nothing changed
    assert error_of(lambda: put(tagset({"a": "b"}), key="nokey"))[:2] == ("NoSuchKey", 404)
    assert error_of(lambda: c.put_object_tagging(Bucket="nobkt", Key="k",
                                                 Tagging=tagset({})))[0] == "NoSuchBucket"
    assert error_of(lambda: c.delete_object_tagging(Bucket="tagc", Key="nokey"))[0] == \
        "NoSuchKey"
    assert error_of(lambda: put(tagset({"a": "b"}), VersionId="bogus"))[0] == \
        "InvalidArgument"
    # malformed XML body
    import urllib.request
    from botocore.auth import SigV4Auth
    from botocore.awsrequest import AWSRequest
    from botocore.credentials import Credentials
    from test_s3 import AK, SK
    for body in (b"<Tagging><TagSet><Tag><Key>a</Key></Tag></TagSet></Tagging>",
                 b"<Nope/>", b"<Tagging><TagSet>"):
        req = AWSRequest(method="PUT", url=s3d.url + "/tagc/obj?tagging", data=body)
        req.headers["x-amz-content-sha256"] = "UNSIGNED-PAYLOAD"
        SigV4Auth(Credentials(AK, SK), "s3", "us-east-1").add_auth(req)
        r = urllib.request.Request(req.url, data=body, method="PUT",
                                   headers=dict(req.headers.items()))
        try:
            urllib.request.urlopen(r, timeout=10)
            raise AssertionError("accepted " + repr(body))
        except urllib.error.HTTPError as e:
            assert e.code == 400 and b"MalformedXML" in e.read(), body
    assert tags_of(c, "tagc", "obj") == {"keep": "me"}


def test_tagging_versions(s3d):
    c = client(s3d)
    c.create_bucket(Bucket="tagv")
    c.put_bucket_versioning(Bucket="tagv", VersioningConfiguration={"Status": "Enabled"})
    v1 = c.put_object(Bucket="tagv", Key="k", Body=b"one", Tagging="gen=1")["VersionId"]
    v2 = c.put_object(Bucket="tagv", Key="k", Body=b"two")["VersionId"]
    r = c.put_object_tagging(Bucket="tagv", Key="k", VersionId=v1, Tagging=tagset({"old": "y"}))
    assert r["VersionId"] == v1
    r = c.put_object_tagging(Bucket="tagv", Key="k", Tagging=tagset({"cur": "y"}))
    assert r["VersionId"] == v2                     # no versionId: the current version
    assert tags_of(c, "tagv", "k", VersionId=v1) == {"old": "y"}
    assert tags_of(c, "tagv", "k") == {"cur": "y"}
    assert c.get_object(Bucket="tagv", Key="k", VersionId=v1)["Body"].read() == b"one"
    c.delete_object_tagging(Bucket="tagv", Key="k", VersionId=v1)
    assert tags_of(c, "tagv", "k", VersionId=v1) == {}
    assert tags_of(c, "tagv", "k") == {"cur": "y"}
    assert error_of(lambda: c.put_object_tagging(
        Bucket="tagv", Key="k", VersionId="0123456789abcdef" * 2,
        Tagging=tagset({})))[0] == "NoSuchVersion"
    dm = c.delete_object(Bucket="tagv", Key="k")["VersionId"]     # a delete marker
    assert error_of(lambda: c.put_object_tagging(Bucket="tagv", Key="k",
                                                 Tagging=tagset({})))[0] == "NoSuchKey"
    assert error_of(lambda: c.put_object_tagging(Bucket="tagv", Key="k", VersionId=dm,
                                                 Tagging=tagset({})))[:2] == \
        ("MethodNotAllowed", 405)


def test_tagging_with_a_lost_drive(make_daemon, tmp_path):
    """Tags are written on a write quorum: with one of four drives gone the
    call succeeds and the tags read back."""
    import shutil
    d, drives = multi_drive(make_daemon, tmp_path)
    c = client(d)
    c.create_bucket(Bucket="tagq")
    c.put_object(Bucket="tagq", Key="k", Body=os.urandom(2 << 20))
    d.stop()
    shutil.rmtree(drives[1] / ".openlake" / "buckets")
    d.start()
    c = client(d)
    c.put_object_tagging(Bucket="tagq", Key="k", Tagging=tagset({"q": "ok"}))
    assert tags_of(c, "tagq", "k") == {"q": "ok"}


def test_failed_tag_lookups_leave_the_store_usable(s3d):
    """PutObjectTagging / DeleteObjectTagging on a missing key, many times
    over (more than a core has request states): each is NoSuchKey, and the
    store keeps serving."""
    c = client(s3d)
    c.create_bucket(Bucket="tagl")
    for i in range(150):
        fn = c.put_object_tagging if i % 2 else c.delete_object_tagging
        kw = {"Tagging": tagset({"a": "b"})} if i % 2 else {}
        assert error_of(lambda: fn(Bucket="tagl", Key=f"missing{i}", **kw))[0] == "NoSuchKey"
    c.put_object(Bucket="tagl", Key="ok", Body=b"fine")
    assert c.get_object(Bucket="tagl", Key="ok")["Body"].read() == b"fine"
