"""How clients reach the S3 API: virtual-host-style addressing under the
configured `s3_domain`, and TLS on the S3 port (`s3_tls_cert` /
`s3_tls_key`). Real daemons, real boto3 and raw signed requests.
"""
import http.client

from botocore.auth import SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials

from test_s3 import AK, SK, client, error_of, s3d  # noqa: F401


def vhost(d, method, host, path, body=b""):
    """A SigV4-signed request for http://<host>:<port><path>, sent to the
    daemon's loopback address with that Host header."""
    url = f"http://{host}:{d.port}{path}"
    req = AWSRequest(method=method, url=url, data=body)
    req.headers["x-amz-content-sha256"] = "UNSIGNED-PAYLOAD"
    SigV4Auth(Credentials(AK, SK), "s3", "us-east-1").add_auth(req)
    conn = http.client.HTTPConnection("127.0.0.1", d.port, timeout=10)
    hdrs = dict(req.headers.items())
    hdrs["Host"] = f"{host}:{d.port}"
    conn.request(method, path, body=body or None, headers=hdrs)
    r = conn.getresponse()
    out = r.status, r.read()
    conn.close()
    return out


def test_virtual_host_style_under_s3_domain(make_daemon):
    d = make_daemon(args=["--mode", "s3", "--s3-domain", "s3.example.test"],
                    env={"OPENLAKE_ACCESS_KEY": AK, "OPENLAKE_SECRET_KEY": SK})
    c = client(d)
    c.create_bucket(Bucket="vbkt")
    # bucket in the host name, key in the path
    assert vhost(d, "PUT", "vbkt.s3.example.test", "/dir/obj.txt", b"hello vhost")[0] == 200
    assert c.get_object(Bucket="vbkt", Key="dir/obj.txt")["Body"].read() == b"hello vhost"
    assert vhost(d, "GET", "vbkt.s3.example.test", "/dir/obj.txt") == (200, b"hello vhost")
    st, body = vhost(d, "GET", "vbkt.s3.example.test", "/?list-type=2")
    assert st == 200 and b"<Key>dir/obj.txt</Key>" in body
    # the bare domain and other hosts are path style
    assert vhost(d, "GET", "s3.example.test", "/vbkt/dir/obj.txt") == (200, b"hello vhost")
    assert vhost(d, "GET", "localhost", "/vbkt/dir/obj.txt") == (200, b"hello vhost")
    # a host naming an invalid bucket under the domain
    st, body = vhost(d, "GET", "bad_bucket.s3.example.test", "/k")
    assert st == 400 and b"InvalidBucketName" in body
    st, body = vhost(d, "GET", "nobkt.s3.example.test", "/k")
    assert st == 404 and b"NoSuchBucket" in body


def test_without_s3_domain_hosts_are_path_style(s3d):
    c = client(s3d)
    c.create_bucket(Bucket="pbkt")
    c.put_object(Bucket="pbkt", Key="k", Body=b"v")
    # "pbkt.s3.example.test" means nothing special without s3_domain
    assert vhost(s3d, "GET", "pbkt.s3.example.test", "/pbkt/k") == (200, b"v")
