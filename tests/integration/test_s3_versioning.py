"""S3 versioning and conditional writes against a real openlaked, with boto3
and the aws CLI: bucket versioning state, version ids on every write, GET /
HEAD / DELETE by versionId, delete markers, Suspended null versions,
ListObjectVersions paging, durability across restarts and kill -9, and
If-None-Match / If-Match on PutObject and CompleteMultipartUpload (a race
of conditional PUTs from threads has exactly one winner)."""
import concurrent.futures
import json
import os
import signal

import pytest

from test_s3 import aws, client, error_of, multi_drive, s3d, shard_files  # noqa: F401 (fixture)


def versioned(c, bucket, status="Enabled"):
    c.put_bucket_versioning(Bucket=bucket, VersioningConfiguration={"Status": status})


def all_versions(c, bucket, **kw):
    """Every (key, version id, is latest, is delete marker), paged by the paginator."""
    out = []
    for page in c.get_paginator("list_object_versions").paginate(Bucket=bucket, **kw):
        rows = [(v["Key"], v["VersionId"], v["IsLatest"], False, v["LastModified"])
                for v in page.get("Versions", [])]
        rows += [(m["Key"], m["VersionId"], m["IsLatest"], True, m["LastModified"])
                 for m in page.get("DeleteMarkers", [])]
        # a page interleaves both kinds newest first per key: restore that order
        rows.sort(key=lambda r: (r[0], -r[4].timestamp()))
        out += [r[:4] for r in rows]
    return out


def test_bucket_versioning_states(s3d):
    c = client(s3d)
    c.create_bucket(Bucket="vstate")
    r = c.get_bucket_versioning(Bucket="vstate")
    assert "Status" not in r                       # never versioned: no Status
    versioned(c, "vstate")
    assert c.get_bucket_versioning(Bucket="vstate")["Status"] == "Enabled"
    versioned(c, "vstate", "Suspended")
    assert c.get_bucket_versioning(Bucket="vstate")["Status"] == "Suspended"
    assert error_of(lambda: c.put_bucket_versioning(
        Bucket="vstate", VersioningConfiguration={"Status": "Sometimes"}))[:2] == ("MalformedXML", 400)
    assert error_of(lambda: versioned(c, "novs"))[:2] == ("NoSuchBucket", 404)
    assert error_of(lambda: c.get_bucket_versioning(Bucket="novs"))[:2] == ("NoSuchBucket", 404)


def test_versions_get_head_delete(s3d):
    c = client(s3d)
    c.create_bucket(Bucket="ver1")
    # a bucket never versioned: no version id header, the null version
    r = c.put_object(Bucket="ver1", Key="pre", Body=b"before")
    assert "VersionId" not in r
    versioned(c, "ver1")
    ids = []
    for i in range(3):
        r = c.put_object(Bucket="ver1", Key="k", Body=b"body %d" % i)
        ids.append(r["VersionId"])
    assert len(set(ids)) == 3 and "null" not in ids
    assert all(len(i) == 32 for i in ids)
    g = c.get_object(Bucket="ver1", Key="k")
    assert g["Body"].read() == b"body 2" and g["VersionId"] == ids[2]
    for i, vid in enumerate(ids):
        g = c.get_object(Bucket="ver1", Key="k", VersionId=vid)
        assert g["Body"].read() == b"body %d" % i and g["VersionId"] == vid
        h = c.head_object(Bucket="ver1", Key="k", VersionId=vid)
        assert h["ContentLength"] == 6 and h["VersionId"] == vid
    # the object written before versioning is the null version
    assert c.get_object(Bucket="ver1", Key="pre", VersionId="null")["Body"].read() == b"before"
    # bad and unknown version ids
    assert error_of(lambda: c.get_object(Bucket="ver1", Key="k", VersionId="nope"))[:2] == \
        ("InvalidArgument", 400)
    assert error_of(lambda: c.get_object(Bucket="ver1", Key="k", VersionId="0" * 31 + "1"))[:2] \
        == ("NoSuchVersion", 404)

    # DELETE without a version: a delete marker
    d = c.delete_object(Bucket="ver1", Key="k")
    assert d["DeleteMarker"] is True
    marker = d["VersionId"]
    assert marker not in ids
    code, status, resp = error_of(lambda: c.get_object(Bucket="ver1", Key="k"))
    assert (code, status) == ("NoSuchKey", 404)
    hdrs = resp["ResponseMetadata"]["HTTPHeaders"]
    assert hdrs["x-amz-delete-marker"] == "true" and hdrs["x-amz-version-id"] == marker
    code, status, resp = error_of(lambda: c.get_object(Bucket="ver1", Key="k", VersionId=marker))
    assert (code, status) == ("MethodNotAllowed", 405)
    assert resp["ResponseMetadata"]["HTTPHeaders"]["x-amz-delete-marker"] == "true"
    assert error_of(lambda: c.head_object(Bucket="ver1", Key="k"))[1] == 404
    # old versions are still there; the key is gone from ListObjects
    assert c.get_object(Bucket="ver1", Key="k", VersionId=ids[0])["Body"].read() == b"body 0"
    assert [o["Key"] for o in c.list_objects_v2(Bucket="ver1").get("Contents", [])] == ["pre"]

    # removing the marker brings the latest version back
    d = c.delete_object(Bucket="ver1", Key="k", VersionId=marker)
    assert d["DeleteMarker"] is True and d["VersionId"] == marker
    assert c.get_object(Bucket="ver1", Key="k")["Body"].read() == b"body 2"
    assert [o["Key"] for o in c.list_objects_v2(Bucket="ver1")["Contents"]] == ["k", "pre"]
    # removing a version for good
    d = c.delete_object(Bucket="ver1", Key="k", VersionId=ids[2])
    assert d["VersionId"] == ids[2] and "DeleteMarker" not in d
    assert error_of(lambda: c.get_object(Bucket="ver1", Key="k", VersionId=ids[2]))[0] == \
        "NoSuchVersion"
    g = c.get_object(Bucket="ver1", Key="k")
    assert g["Body"].read() == b"body 1" and g["VersionId"] == ids[1]
    lst = c.list_objects_v2(Bucket="ver1")["Contents"]
    assert [(o["Key"], o["Size"]) for o in lst] == [("k", 6), ("pre", 6)]
    for vid in ids[:2]:
        c.delete_object(Bucket="ver1", Key="k", VersionId=vid)
    assert error_of(lambda: c.get_object(Bucket="ver1", Key="k"))[:2] == ("NoSuchKey", 404)
    assert [v[0] for v in all_versions(c, "ver1")] == ["pre"]
    # a bucket of versions only empties once every version is gone
    c.delete_object(Bucket="ver1", Key="pre")            # a marker over the null version
    assert error_of(lambda: c.delete_bucket(Bucket="ver1"))[0] == "BucketNotEmpty"
    for k, vid, _, _ in all_versions(c, "ver1"):
        c.delete_object(Bucket="ver1", Key=k, VersionId=vid)
    assert all_versions(c, "ver1") == []
    c.delete_bucket(Bucket="ver1")


def test_big_versions_and_suspended_null_version(s3d):
    c = client(s3d)
    c.create_bucket(Bucket="ver2")
    versioned(c, "ver2")
    big = [os.urandom(3 * (1 << 20) + i) for i in range(2)]   # shard files, not inline
    ids = [c.put_object(Bucket="ver2", Key="big", Body=b)["VersionId"] for b in big]
    for vid, b in zip(ids, big):
        assert c.get_object(Bucket="ver2", Key="big", VersionId=vid)["Body"].read() == b
    versioned(c, "ver2", "Suspended")
    r = c.put_object(Bucket="ver2", Key="big", Body=b"null one")
    assert r.get("VersionId") == "null"
    r = c.put_object(Bucket="ver2", Key="big", Body=b"null two")   # replaces the null version
    assert c.get_object(Bucket="ver2", Key="big")["Body"].read() == b"null two"
    vs = all_versions(c, "ver2")
    assert [(v[1], v[2]) for v in vs] == [("null", True), (ids[1], False), (ids[0], False)]
    for vid, b in zip(ids, big):      # the versioned versions are kept
        assert c.get_object(Bucket="ver2", Key="big", VersionId=vid)["Body"].read() == b
    # a DELETE while Suspended: a null delete marker replacing the null version
    d = c.delete_object(Bucket="ver2", Key="big")
    assert d["DeleteMarker"] is True and d["VersionId"] == "null"
    vs = all_versions(c, "ver2")
    assert [(v[1], v[2], v[3]) for v in vs] == [("null", True, True), (ids[1], False, False),
                                                (ids[0], False, False)]
    # deleting a version of big data removes its shard files too
    c.delete_object(Bucket="ver2", Key="big", VersionId=ids[0])
    parts = shard_files(s3d.data / ".openlake" / "buckets" / "ver2")
    assert len(parts) == 1, parts


def test_list_object_versions_paging(s3d):
    c = client(s3d)
    c.create_bucket(Bucket="lver")
    versioned(c, "lver")
    want = []
    for k in ["a/1", "a/2", "b", "c/x/y", "d"]:
        ids = [c.put_object(Bucket="lver", Key=k, Body=b"%d" % i)["VersionId"] for i in range(3)]
        want += [(k, vid, i == 2, False) for i, vid in reversed(list(enumerate(ids)))]
    m = c.delete_object(Bucket="lver", Key="b")["VersionId"]
    want = [w if w[0] != "b" else (w[0], w[1], False, w[3]) for w in want]
    i = next(j for j, w in enumerate(want) if w[0] == "b")
    want.insert(i, ("b", m, True, True))
    # one page, and pages of every size: the same list
    assert all_versions(c, "lver") == want
    for size in (1, 2, 3, 5, 7):
        assert all_versions(c, "lver", PaginationConfig={"PageSize": size}) == want, size
    # markers by hand
    r = c.list_object_versions(Bucket="lver", MaxKeys=4)
    assert r["IsTruncated"] and r["NextKeyMarker"] == "a/2"
    assert r["NextVersionIdMarker"] == want[3][1]
    r2 = c.list_object_versions(Bucket="lver", KeyMarker=r["NextKeyMarker"],
                                VersionIdMarker=r["NextVersionIdMarker"], MaxKeys=1)
    assert [(v["Key"], v["VersionId"]) for v in r2["Versions"]] == [want[4][:2]]
    # prefix and delimiter
    r = c.list_object_versions(Bucket="lver", Delimiter="/")
    assert [p["Prefix"] for p in r["CommonPrefixes"]] == ["a/", "c/"]
    assert {v["Key"] for v in r["Versions"]} == {"b", "d"}
    r = c.list_object_versions(Bucket="lver", Prefix="c/")
    assert [v["Key"] for v in r["Versions"]] == ["c/x/y"] * 3
    r = c.list_object_versions(Bucket="lver", MaxKeys=0)
    assert not r["IsTruncated"] and "Versions" not in r
    assert error_of(lambda: c.list_object_versions(Bucket="lver", VersionIdMarker=want[0][1])) \
        [:2] == ("InvalidArgument", 400)
    assert error_of(lambda: c.list_object_versions(Bucket="nolv"))[:2] == ("NoSuchBucket", 404)
    # DeleteObjects with versions: markers and versions removed
    r = c.delete_objects(Bucket="lver", Delete={"Objects": [
        {"Key": "d"}, {"Key": "a/1", "VersionId": want[0][1]}, {"Key": "b", "VersionId": m}]})
    got = {d["Key"]: d for d in r["Deleted"]}
    assert got["d"]["DeleteMarker"] is True and len(got["d"]["DeleteMarkerVersionId"]) == 32
    assert got["a/1"]["VersionId"] == want[0][1] and "DeleteMarker" not in got["a/1"]
    assert got["b"]["DeleteMarker"] is True and got["b"]["DeleteMarkerVersionId"] == m
    keys = [o["Key"] for o in c.list_objects_v2(Bucket="lver")["Contents"]]
    assert keys == ["a/1", "a/2", "b", "c/x/y"]


def test_unversioned_bucket_lists_null_versions(s3d, tmp_path):
    c = client(s3d)
    c.create_bucket(Bucket="plain")
    for k in ["x", "y/z"]:
        c.put_object(Bucket="plain", Key=k, Body=b"v")
    assert all_versions(c, "plain") == [("x", "null", True, False), ("y/z", "null", True, False)]
    c.delete_object(Bucket="plain", Key="x")         # no marker without versioning
    assert all_versions(c, "plain") == [("y/z", "null", True, False)]
    # the aws CLI reads the same document
    p = aws(s3d, tmp_path, "s3api", "list-object-versions", "--bucket", "plain")
    doc = json.loads(p.stdout)
    assert [(v["Key"], v["VersionId"], v["IsLatest"]) for v in doc["Versions"]] == \
        [("y/z", "null", True)]


@pytest.mark.parametrize("how", ["clean", "kill"])
def test_versions_survive_restart(make_daemon, tmp_path, how):
    d, _ = multi_drive(make_daemon, tmp_path)
    c = client(d)
    c.create_bucket(Bucket="dver")
    versioned(c, "dver")
    ids = [c.put_object(Bucket="dver", Key="k", Body=b"%d" % i)["VersionId"] for i in range(3)]
    m = c.delete_object(Bucket="dver", Key="gone-soon")["VersionId"]   # a marker alone
    c.put_object(Bucket="dver", Key="m", Body=b"m")
    mm = c.delete_object(Bucket="dver", Key="m")["VersionId"]
    before = all_versions(c, "dver")
    if how == "kill":
        d.signal(signal.SIGKILL)
        d.proc.wait()
        d.stop(expect_rc=None)
    else:
        d.stop()
    d.start()
    c = client(d)
    assert c.get_bucket_versioning(Bucket="dver")["Status"] == "Enabled"
    assert all_versions(c, "dver") == before
    assert {(v[0], v[1]) for v in before if v[3]} == {("gone-soon", m), ("m", mm)}
    for i, vid in enumerate(ids):
        assert c.get_object(Bucket="dver", Key="k", VersionId=vid)["Body"].read() == b"%d" % i
    assert [o["Key"] for o in c.list_objects_v2(Bucket="dver")["Contents"]] == ["k"]
    # still Enabled after the restart: new writes get new ids
    assert c.put_object(Bucket="dver", Key="k", Body=b"3")["VersionId"] not in ids


def test_conditional_put(s3d):
    c = client(s3d)
    c.create_bucket(Bucket="cwr")
    r = c.put_object(Bucket="cwr", Key="k", Body=b"one", IfNoneMatch="*")
    etag = r["ETag"]
    assert error_of(lambda: c.put_object(Bucket="cwr", Key="k", Body=b"two",
                                         IfNoneMatch="*"))[:2] == ("PreconditionFailed", 412)
    assert c.get_object(Bucket="cwr", Key="k")["Body"].read() == b"one"
    # If-Match: the ETag, with or without its quotes
    r = c.put_object(Bucket="cwr", Key="k", Body=b"two", IfMatch=etag)
    assert c.get_object(Bucket="cwr", Key="k")["Body"].read() == b"two"
    r = c.put_object(Bucket="cwr", Key="k", Body=b"three", IfMatch=r["ETag"].strip('"'))
    assert error_of(lambda: c.put_object(Bucket="cwr", Key="k", Body=b"x",
                                         IfMatch=etag))[:2] == ("PreconditionFailed", 412)
    assert error_of(lambda: c.put_object(Bucket="cwr", Key="none", Body=b"x",
                                         IfMatch=etag))[:2] == ("NoSuchKey", 404)
    assert error_of(lambda: c.put_object(Bucket="cwr", Key="k", Body=b"x",
                                         IfNoneMatch=etag))[:2] == ("NotImplemented", 501)
    assert c.get_object(Bucket="cwr", Key="k")["Body"].read() == b"three"
    # a delete marker is no object: If-None-Match: * writes over it
    versioned(c, "cwr")
    c.delete_object(Bucket="cwr", Key="k")
    assert error_of(lambda: c.put_object(Bucket="cwr", Key="k", Body=b"x",
                                         IfMatch=etag))[:2] == ("NoSuchKey", 404)
    c.put_object(Bucket="cwr", Key="k", Body=b"four", IfNoneMatch="*")
    assert c.get_object(Bucket="cwr", Key="k")["Body"].read() == b"four"
    # large bodies (shard files) are conditional the same way
    big = os.urandom(2 * (1 << 20))
    assert error_of(lambda: c.put_object(Bucket="cwr", Key="k", Body=big,
                                         IfNoneMatch="*"))[:2] == ("PreconditionFailed", 412)
    assert not shard_files(s3d.data / ".openlake" / "buckets" / "cwr")


def test_conditional_put_race_has_one_winner(make_daemon):
    """Threads on a daemon with several cores PUT one key with If-None-Match: *
    at the same time: exactly one succeeds, the others get 412 or 409."""
    from test_s3 import AK, SK
    d = make_daemon(args=["--mode", "s3"], env={"OPENLAKE_ACCESS_KEY": AK,
                                                "OPENLAKE_SECRET_KEY": SK}, threads=4)
    c = client(d)
    c.create_bucket(Bucket="race")
    for rnd in range(5):
        key = f"k{rnd}"
        clients = [client(d) for _ in range(8)]

        def put(i):
            try:
                clients[i].put_object(Bucket="race", Key=key, Body=b"writer %d" % i,
                                      IfNoneMatch="*")
                return 200, i
            except Exception as e:    # noqa: BLE001
                return e.response["ResponseMetadata"]["HTTPStatusCode"], i

        with concurrent.futures.ThreadPoolExecutor(8) as ex:
            res = list(ex.map(put, range(8)))
        wins = [i for st, i in res if st == 200]
        assert len(wins) == 1, res
        assert all(st in (409, 412) for st, _ in res if st != 200), res
        assert c.get_object(Bucket="race", Key=key)["Body"].read() == b"writer %d" % wins[0]


def test_conditional_complete_multipart(s3d):
    c = client(s3d)
    c.create_bucket(Bucket="cmpu")
    versioned(c, "cmpu")

    n = [0]

    def upload(key, **kw):
        n[0] += 1
        u = c.create_multipart_upload(Bucket="cmpu", Key=key)["UploadId"]
        p = c.upload_part(Bucket="cmpu", Key=key, UploadId=u, PartNumber=1,
                          Body=b"part %d" % n[0])
        return lambda: c.complete_multipart_upload(
            Bucket="cmpu", Key=key, UploadId=u,
            MultipartUpload={"Parts": [{"PartNumber": 1, "ETag": p["ETag"]}]}, **kw), u

    done, _ = upload("m", IfNoneMatch="*")
    r = done()
    assert len(r["VersionId"]) == 32
    again, u = upload("m", IfNoneMatch="*")
    assert error_of(again)[:2] == ("PreconditionFailed", 412)
    # the upload stays: the client may complete it without the condition
    assert [x["UploadId"] for x in c.list_multipart_uploads(Bucket="cmpu")["Uploads"]] == [u]
    c.abort_multipart_upload(Bucket="cmpu", Key="m", UploadId=u)
    ok, _ = upload("m", IfMatch=r["ETag"])
    r2 = ok()
    assert r2["VersionId"] != r["VersionId"]
    bad, _ = upload("m", IfMatch=r["ETag"])
    assert error_of(bad)[:2] == ("PreconditionFailed", 412)
    assert [v[1] for v in all_versions(c, "cmpu")] == [r2["VersionId"], r["VersionId"]]


def test_copy_object_versions(s3d):
    c = client(s3d)
    c.create_bucket(Bucket="cpv")
    versioned(c, "cpv")
    v1 = c.put_object(Bucket="cpv", Key="src", Body=b"first")["VersionId"]
    c.put_object(Bucket="cpv", Key="src", Body=b"second")
    r = c.copy_object(Bucket="cpv", Key="dst", CopySource={"Bucket": "cpv", "Key": "src",
                                                          "VersionId": v1})
    assert r["CopySourceVersionId"] == v1 and len(r["VersionId"]) == 32
    assert c.get_object(Bucket="cpv", Key="dst")["Body"].read() == b"first"
    m = c.delete_object(Bucket="cpv", Key="src")["VersionId"]
    assert error_of(lambda: c.copy_object(Bucket="cpv", Key="d2",
                                          CopySource={"Bucket": "cpv", "Key": "src"}))[1] == 404
    assert error_of(lambda: c.copy_object(
        Bucket="cpv", Key="d2", CopySource={"Bucket": "cpv", "Key": "src", "VersionId": m}))[1] \
        == 400
    # a conditional copy: the destination must not exist
    assert error_of(lambda: c.copy_object(
        Bucket="cpv", Key="dst", CopySource={"Bucket": "cpv", "Key": "src", "VersionId": v1},
        IfNoneMatch="*"))[:2] == ("PreconditionFailed", 412)
    c.copy_object(Bucket="cpv", Key="d3", CopySource={"Bucket": "cpv", "Key": "src",
                                                      "VersionId": v1}, IfNoneMatch="*")
    assert c.get_object(Bucket="cpv", Key="d3")["Body"].read() == b"first"


def test_version_cap_is_a_clear_error(s3d):
    """Small objects live inside the metadata file: on one drive a 100 KB
    version adds 100 KB to it, so a few versions reach the file's limit; the
    next PUT is refused with a message, and deleting a version makes room."""
    c = client(s3d)
    c.create_bucket(Bucket="capb")
    versioned(c, "capb")
    ids = []
    for _ in range(40):
        try:
            ids.append(c.put_object(Bucket="capb", Key="k", Body=os.urandom(100_000))["VersionId"])
        except Exception as e:    # noqa: BLE001
            err = e.response
            break
    else:
        raise AssertionError("no limit reached")
    assert err["Error"]["Code"] == "InvalidRequest" and "too many versions" in err["Error"]["Message"]
    assert 2 <= len(ids) < 40
    assert len(all_versions(c, "capb")) == len(ids)      # nothing lost or half-written
    c.delete_object(Bucket="capb", Key="k", VersionId=ids[0])
    c.put_object(Bucket="capb", Key="k", Body=os.urandom(100_000))


def test_version_edge_cases(s3d):
    c = client(s3d)
    c.create_bucket(Bucket="edge")
    c.put_object(Bucket="edge", Key="plain", Body=b"p")
    assert c.get_object(Bucket="edge", Key="plain", VersionId="null")["Body"].read() == b"p"
    versioned(c, "edge")
    v = c.put_object(Bucket="edge", Key="a b&c", Body=b"x")["VersionId"]
    m = c.delete_object(Bucket="edge", Key="a b&c")["VersionId"]
    assert error_of(lambda: c.head_object(Bucket="edge", Key="a b&c", VersionId=m))[1] == 405
    assert c.head_object(Bucket="edge", Key="a b&c", VersionId=v)["ContentLength"] == 1
    # asked for explicitly, botocore leaves the keys encoded (it decodes what it asked itself)
    r = c.list_object_versions(Bucket="edge", EncodingType="url")
    assert {x["Key"] for x in r["Versions"]} == {"a%20b%26c", "plain"}
    assert [x["Key"] for x in r["DeleteMarkers"]] == ["a%20b%26c"]
    r = c.list_object_versions(Bucket="edge")
    assert [x["Key"] for x in r["DeleteMarkers"]] == ["a b&c"]
    # a version id of another key is not this key's
    assert error_of(lambda: c.get_object(Bucket="edge", Key="plain", VersionId=v))[:2] == \
        ("NoSuchVersion", 404)
    # deleting a version that does not exist: 204, nothing changes
    c.delete_object(Bucket="edge", Key="plain", VersionId="f" * 32)
    assert c.get_object(Bucket="edge", Key="plain")["Body"].read() == b"p"


def test_racing_versioned_puts_lose_nothing(make_daemon):
    """Unconditional PUTs of one key from threads on a 4-core daemon commit one
    after the other: every version is kept, and the listing names the latest."""
    from test_s3 import AK, SK
    d = make_daemon(args=["--mode", "s3"], env={"OPENLAKE_ACCESS_KEY": AK,
                                                "OPENLAKE_SECRET_KEY": SK}, threads=4)
    c = client(d)
    c.create_bucket(Bucket="vrace")
    versioned(c, "vrace")
    clients = [client(d) for _ in range(8)]

    def put(i):
        return clients[i].put_object(Bucket="vrace", Key="k", Body=b"w%d" % i * (i + 1))

    for _ in range(3):
        with concurrent.futures.ThreadPoolExecutor(8) as ex:
            ids = [r["VersionId"] for r in ex.map(put, range(8))]
        assert len(set(ids)) == 8
    vs = all_versions(c, "vrace")
    assert len(vs) == 24 and sum(v[2] for v in vs) == 1
    head = c.head_object(Bucket="vrace", Key="k")
    lst = c.list_objects_v2(Bucket="vrace")["Contents"]
    assert [(o["ETag"], o["Size"]) for o in lst] == [(head["ETag"], head["ContentLength"])]
    assert [v[1] for v in vs if v[2]] == [head["VersionId"]]
