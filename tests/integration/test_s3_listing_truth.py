"""Listings tell the truth: ListObjectsV2 (and ListObjectVersions) show
exactly the keys, ETags and sizes that HEAD finds, whatever the clients do.

Every write is sent over its own raw connection (SigV4-signed, unsigned
payload) to a daemon on 2 cores, and the client goes away at a stage of
the request: right after the head, in the middle of the body, right after
the last body byte (at once or a few milliseconds later, before reading
the answer), by RST or by FIN; or it reads the answer. The operations:
PutObject, CopyObject, CompleteMultipartUpload, DeleteObject,
DeleteObjects, and on a versioned bucket versioned PUTs, delete markers,
deletes of one version and DeleteObjects by version. Whatever committed
must be listed, whatever did not must not be: checked once the daemon is
idle, again after a clean restart (SIGTERM: the saved indexes) and after
kill -9 (the indexes rebuilt from the object metadata). Then two clients
race PUTs of one key on the two cores: the listing's ETag and size are
HEAD's.
"""
import base64
import concurrent.futures
import hashlib
import http.client
import os
import random
import signal
import socket
import struct
import threading
import time
import urllib.request

import botocore
import pytest
from botocore.auth import SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials

from test_s3 import AK, SK, client

KiB = 1024
# client stages: where the connection ends, and how long the client waits
# there first (s); "answer" reads the answer
BODY_STAGES = [("head", 0), ("mid", 0), ("body", 0), ("body", 0.003), ("body", 0.02),
               ("answer", 0)]
HEAD_STAGES = [("head", 0), ("head", 0.002), ("head", 0.01), ("head", 0.05), ("answer", 0)]
CLOSES = ["rst", "fin"]
PER = int(os.environ.get("OPENLAKE_LISTING_KEYS", "3"))   # keys per stage and close


def start(make_daemon, tmp_path):
    drives = [tmp_path / f"drive{i}" for i in range(4)]
    for dr in drives:
        dr.mkdir()
    return make_daemon(args=["--mode", "s3", "--data-dirs", ",".join(map(str, drives))],
                       env={"OPENLAKE_ACCESS_KEY": AK, "OPENLAKE_SECRET_KEY": SK}, threads=2)


def raw(d, method, path, body=b"", headers=None, stage="answer", close="rst", delay=0.0):
    """One signed request on its own connection, ended at stage (see above).
    Returns (status, body) for "answer", else None."""
    req = AWSRequest(method=method, url=f"http://127.0.0.1:{d.port}{path}", data=body,
                     headers=dict(headers or {}))
    req.headers["x-amz-content-sha256"] = "UNSIGNED-PAYLOAD"
    SigV4Auth(Credentials(AK, SK), "s3", "us-east-1").add_auth(req)
    lines = [f"{method} {path} HTTP/1.1", f"Host: 127.0.0.1:{d.port}",
             f"Content-Length: {len(body)}"]
    lines += [f"{k}: {v}" for k, v in req.headers.items()]
    head = ("\r\n".join(lines) + "\r\n\r\n").encode()
    s = socket.create_connection(("127.0.0.1", d.port), timeout=30)
    try:
        if close == "rst":
            s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        if stage == "head":
            s.sendall(head)
        elif stage == "mid":
            s.sendall(head + body[:len(body) // 2])
        else:
            s.sendall(head + body)
        if stage != "answer":
            time.sleep(delay)
            return None
        r = http.client.HTTPResponse(s)
        r.begin()
        return r.status, r.read()
    finally:
        s.close()


def head(c, b, k):
    """What HEAD finds: ("obj", etag, size, version id), ("marker", version
    id), or None."""
    try:
        r = c.head_object(Bucket=b, Key=k)
        return ("obj", r["ETag"], r["ContentLength"], r.get("VersionId"))
    except botocore.exceptions.ClientError as e:
        h = e.response["ResponseMetadata"]["HTTPHeaders"]
        assert e.response["ResponseMetadata"]["HTTPStatusCode"] == 404, e.response
        if h.get("x-amz-delete-marker") == "true":
            return ("marker", h.get("x-amz-version-id"))
        return None


def listed(c, b):
    out = {}
    for page in c.get_paginator("list_objects_v2").paginate(Bucket=b):
        for o in page.get("Contents", []):
            out[o["Key"]] = (o["ETag"], o["Size"])
    return out


def listed_versions(c, b):
    """key -> the latest as head() says it, from ListObjectVersions."""
    out = {}
    for page in c.get_paginator("list_object_versions").paginate(Bucket=b):
        for v in page.get("Versions", []):
            if v["IsLatest"]:
                out[v["Key"]] = ("obj", v["ETag"], v["Size"], v["VersionId"])
            else:
                out.setdefault(v["Key"], None)
        for m in page.get("DeleteMarkers", []):
            if m["IsLatest"]:
                out[m["Key"]] = ("marker", m["VersionId"])
            else:
                out.setdefault(m["Key"], None)
    return out


def mismatch(c, b, keys, versioned):
    """What the listings get wrong about keys (empty: nothing)."""
    found = {k: head(c, b, k) for k in keys}
    want = {k: (h[1], h[2]) for k, h in found.items() if h and h[0] == "obj"}
    got = listed(c, b)
    bad = {k: (got.get(k), want.get(k)) for k in set(got) | set(want)
           if got.get(k) != want.get(k)}
    if versioned:
        lv = listed_versions(c, b)
        for k in set(lv) | {k for k, h in found.items() if h}:
            if lv.get(k) != found.get(k):
                bad["versions:" + k] = (lv.get(k), found.get(k))
    return bad


def check(d, buckets, what, timeout=30):
    """Once the daemon is idle (a lost update never comes back, so waiting
    longer cannot hide one), each bucket's listings match HEAD."""
    c = client(d)
    deadline = time.time() + timeout
    while True:
        bad = {b: mismatch(c, b, keys, ver) for b, (keys, ver) in buckets.items()}
        bad = {b: m for b, m in bad.items() if m}
        if not bad or time.time() > deadline:
            break
        time.sleep(0.5)
    assert not bad, "%s: %s" % (what, "; ".join(
        f"{b}/{k}: listed {g}, HEAD {w}" for b, m in sorted(bad.items())
        for k, (g, w) in sorted(m.items())))


def metric(d, name):
    with urllib.request.urlopen(d.url + "/_openlake/metrics", timeout=10) as r:
        for ln in r.read().decode().splitlines():
            if ln.startswith(name + " "):
                return int(ln.split()[1])
    return None


def xml_complete(etag):
    return (f"<CompleteMultipartUpload><Part><PartNumber>1</PartNumber><ETag>{etag}</ETag>"
            "</Part></CompleteMultipartUpload>").encode()


def xml_delete(objs):
    inner = "".join(f"<Object><Key>{k}</Key>" + (f"<VersionId>{v}</VersionId>" if v else "") +
                    "</Object>" for k, v in objs)
    return f"<Delete><Quiet>true</Quiet>{inner}</Delete>".encode()


def md5_header(body):
    return {"Content-MD5": base64.b64encode(hashlib.md5(body).digest()).decode()}


def variants(stages):
    for stage, delay in stages:
        for close in CLOSES:
            for i in range(PER):
                yield stage, delay, close, i


def name(prefix, stage, delay, close, i):
    return f"{prefix}/{stage}-{int(delay * 1000)}ms-{close}-{i}"


def test_listing_equals_head_after_clients_vanish_at_every_stage(make_daemon, tmp_path):
    d = start(make_daemon, tmp_path)
    c = client(d)
    c.create_bucket(Bucket="plain")
    c.create_bucket(Bucket="ver")
    c.put_bucket_versioning(Bucket="ver", VersioningConfiguration={"Status": "Enabled"})
    rng = random.Random(7)
    body_of = lambda: os.urandom(rng.choice([1 * KiB, 200 * KiB]))  # noqa: E731
    keys = {"plain": set(), "ver": set()}
    jobs = []   # (fn, args): the raw requests, run concurrently

    def job(*a, **kw):
        jobs.append((a, kw))

    for b in ("plain", "ver"):
        c.put_object(Bucket=b, Key="src/small", Body=os.urandom(3 * KiB))
        c.put_object(Bucket=b, Key="src/big", Body=os.urandom(300 * KiB))
        keys[b] |= {"src/small", "src/big"}
        # PutObject (versioned: over an existing version)
        for st, dl, cl, i in variants(BODY_STAGES):
            k = name("put", st, dl, cl, i)
            keys[b].add(k)
            if b == "ver":
                c.put_object(Bucket=b, Key=k, Body=b"v1")
            job("PUT", f"/{b}/{k}", body_of(), None, st, cl, dl)
        # CopyObject: a PUT whose bytes come from a GET
        for st, dl, cl, i in variants(HEAD_STAGES):
            k = name("copy", st, dl, cl, i)
            keys[b].add(k)
            src = "src/big" if i % 2 else "src/small"
            job("PUT", f"/{b}/{k}", b"", {"x-amz-copy-source": f"/{b}/{src}"}, st, cl, dl)
        # CompleteMultipartUpload of one part
        for st, dl, cl, i in variants(BODY_STAGES):
            k = name("mpu", st, dl, cl, i)
            keys[b].add(k)
            uid = c.create_multipart_upload(Bucket=b, Key=k)["UploadId"]
            e = c.upload_part(Bucket=b, Key=k, UploadId=uid, PartNumber=1,
                              Body=body_of())["ETag"]
            job("POST", f"/{b}/{k}?uploadId={uid}", xml_complete(e), None, st, cl, dl)
        # DeleteObject (versioned: a delete marker)
        for st, dl, cl, i in variants(HEAD_STAGES):
            k = name("del", st, dl, cl, i)
            keys[b].add(k)
            c.put_object(Bucket=b, Key=k, Body=b"to delete")
            job("DELETE", f"/{b}/{k}", b"", None, st, cl, dl)
        # DeleteObjects, three keys a request
        for st, dl, cl, i in variants(BODY_STAGES):
            ks = [name(f"multi{j}", st, dl, cl, i) for j in range(3)]
            for k in ks:
                c.put_object(Bucket=b, Key=k, Body=b"to delete")
            keys[b] |= set(ks)
            x = xml_delete([(k, None) for k in ks])
            job("POST", f"/{b}?delete", x, md5_header(x), st, cl, dl)
    # versioned only: deletes of one version (the latest, or an older one),
    # and DeleteObjects by version
    for st, dl, cl, i in variants(HEAD_STAGES):
        k = name("vdel", st, dl, cl, i)
        keys["ver"].add(k)
        v1 = c.put_object(Bucket="ver", Key=k, Body=b"one")["VersionId"]
        v2 = c.put_object(Bucket="ver", Key=k, Body=b"two!")["VersionId"]
        job("DELETE", f"/ver/{k}?versionId={v2 if i % 2 else v1}", b"", None, st, cl, dl)
    for st, dl, cl, i in variants(BODY_STAGES):
        ks = [name(f"vmulti{j}", st, dl, cl, i) for j in range(2)]
        objs = []
        for k in ks:
            v1 = c.put_object(Bucket="ver", Key=k, Body=b"one")["VersionId"]
            c.put_object(Bucket="ver", Key=k, Body=b"two!")
            objs.append((k, v1))
        objs.append((ks[1], None))   # and a delete marker
        keys["ver"] |= set(ks)
        x = xml_delete(objs)
        job("POST", "/ver?delete", x, md5_header(x), st, cl, dl)

    random.Random(3).shuffle(jobs)
    with concurrent.futures.ThreadPoolExecutor(8) as ex:
        for r, (a, kw) in zip(ex.map(lambda j: raw(d, *j[0], **j[1]), jobs), jobs):
            if a[4] == "answer":
                assert r[0] in (200, 204), (a[:2], r)
    buckets = {"plain": (keys["plain"], False), "ver": (keys["ver"], True)}
    check(d, buckets, "serving")
    assert metric(d, "openlake_store_catalog_errors_total") == 0
    d.stop()                                 # SIGTERM: the indexes are saved
    assert "listing index:" not in d.stderr() and "not saved" not in d.stderr()
    d.start()
    check(d, buckets, "after a clean restart")
    d.signal(signal.SIGKILL)                 # no clean marker: rebuilt from metadata
    d.proc.wait()
    d.stop(expect_rc=None)
    d.start()
    check(d, buckets, "after kill -9")


@pytest.mark.parametrize("versioned", [False, True])
def test_racing_puts_of_one_key_on_two_cores(make_daemon, tmp_path, versioned):
    d = start(make_daemon, tmp_path)
    c = client(d)
    c.create_bucket(Bucket="race")
    if versioned:
        c.put_bucket_versioning(Bucket="race", VersioningConfiguration={"Status": "Enabled"})
    rounds = int(os.environ.get("OPENLAKE_LISTING_RACE", "60"))
    errors = []

    def racer(seed):
        rng = random.Random(seed)
        try:
            for i in range(rounds):
                body = os.urandom(rng.choice([100, 4 * KiB, 150 * KiB])) + bytes([seed, i])
                st, _ = raw(d, "PUT", "/race/the-key", body)   # a new connection each time
                assert st == 200, st
        except Exception as e:   # noqa: BLE001 - reported by the main thread
            errors.append(e)

    ts = [threading.Thread(target=racer, args=(s,)) for s in (1, 2)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    assert not errors, errors
    check(d, {"race": ({"the-key"}, versioned)}, "after the race")
    h = head(c, "race", "the-key")
    assert listed(c, "race") == {"the-key": (h[1], h[2])}
    if versioned:
        vs = c.list_object_versions(Bucket="race")["Versions"]
        assert len(vs) == 2 * rounds
