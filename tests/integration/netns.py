"""Network namespaces for cluster tests: a bridge in the test's namespace and
n namespaces plugged into it (a veth pair each), made by the test and
removed after, and openlaked nodes run inside them (the conftest Daemon's
`wrap` and `host`). A node's link can be cut (down) and healed.

Used by test_cluster_netns.py and the cross-host vLLM tests in
test_vllm.py. Needs root and iproute2 (NETNS_WHY says why not). Traffic
stays on the test's bridge: a private /24 in 10.0.0.0/8 that no interface
of the host has. Filesystem paths (a node's Unix socket, its shared memory)
work across network namespaces, so clients in the host's namespace reach a
node through its socket as on one host.
"""
import os
import random
import shutil
import subprocess

import pytest

IP = shutil.which("ip")
NETNS_WHY = "" if os.geteuid() == 0 and IP else "network namespaces need root and iproute2"


def sh(*args, check=True):
    r = subprocess.run([IP, *args], capture_output=True, text=True, timeout=30)
    if check and r.returncode != 0:
        raise AssertionError(f"ip {' '.join(args)}: {r.stderr}")
    return r


class Net:
    """A bridge in this namespace and n namespaces plugged into it."""

    def __init__(self, n):
        self.tag = "%04x" % random.randrange(1 << 16)
        self.br = f"olbr{self.tag}"
        used = subprocess.run([IP, "-4", "addr"], capture_output=True, text=True).stdout
        for _ in range(100):
            self.net = f"10.{random.randrange(200, 250)}.{random.randrange(1, 255)}"
            if f"inet {self.net}." not in used:
                break
        self.ns, self.ips, self.links = [], [], []
        with open("/proc/sys/net/ipv4/ip_local_port_range") as f:
            self.top = int(f.read().split()[1])   # the host's: conftest's ports are under it
        try:
            sh("link", "add", self.br, "type", "bridge")
            sh("addr", "add", f"{self.net}.1/24", "dev", self.br)
            sh("link", "set", self.br, "up")
            for i in range(1, n + 1):
                ns, host, inner = f"ol{self.tag}n{i}", f"vh{self.tag}{i}", f"vn{self.tag}{i}"
                sh("netns", "add", ns)
                self.ns.append(ns)
                sh("link", "add", host, "type", "veth", "peer", "name", inner)
                self.links.append(host)
                sh("link", "set", inner, "netns", ns)
                sh("link", "set", host, "master", self.br, "up")
                ip = f"{self.net}.{10 + i}"
                sh("-n", ns, "addr", "add", f"{ip}/24", "dev", inner)
                sh("-n", ns, "link", "set", inner, "up")
                sh("-n", ns, "link", "set", "lo", "up")
                # Outgoing connections' ports above every port a node here
                # listens on (9100, and conftest's free ports: in the host's
                # range, 32768-60999 by default): a node killed with connections open
                # leaves their ends in FIN_WAIT for up to a minute, and one
                # on the port the node listens on kept it from restarting.
                if self.top < 65000:
                    r = subprocess.run([IP, "netns", "exec", ns, "sh", "-c",
                                        f"echo {max(61000, self.top + 1)} 65535 > "
                                        "/proc/sys/net/ipv4/ip_local_port_range"],
                                       capture_output=True, text=True, timeout=30)
                    if r.returncode != 0:
                        raise AssertionError(f"ip_local_port_range in {ns}: {r.stderr}")
                self.ips.append(ip)
        except BaseException:
            self.close()
            raise

    @property
    def host_ip(self):
        return f"{self.net}.1"

    def cut(self, i, up=False):
        """Node i's link (1-based) down: cut off from everyone, etcd included."""
        sh("link", "set", self.links[i - 1], "up" if up else "down")

    def put(self, d, i):
        """Daemon d (not started yet) runs in namespace i (1-based): its
        listeners on that namespace's address, reached there from here."""
        ip = self.ips[i - 1]
        d.args = [a.replace("127.0.0.1:", f"{ip}:") for a in d.args]
        d.host = ip
        d.wrap = [IP, "netns", "exec", self.ns[i - 1]]
        return d

    def close(self):
        for ns in self.ns:
            sh("netns", "del", ns, check=False)      # its veth pair goes with it
        sh("link", "del", self.br, check=False)


@pytest.fixture
def net():
    """Four namespaces on one bridge, removed after the test."""
    n = Net(4)
    yield n
    n.close()


def cluster_args(etcd_url, i, ip, secret_file, ttl=2):
    """Node i of cluster c1 in namespace address ip."""
    return ["--cluster.name", "c1", "--cluster.etcd", etcd_url, "--self-id", str(i),
            "--cluster.lease-ttl-secs", str(ttl), "--cluster.etcd-timeout-ms", "1000",
            "--rpc-addr", f"{ip}:9100", "--cluster.secret-file", secret_file]


def start_etcd(net, tmp_path):
    """A real etcd listening on the bridge, reached from every namespace."""
    from test_cluster import Etcd
    e = Etcd(tmp_path)
    e.url = f"http://{net.host_ip}:{e.client}"
    return e.start()


def metrics_in(ns, url):
    """/_openlake/metrics read from inside namespace ns (curl)."""
    r = subprocess.run([IP, "netns", "exec", ns, "curl", "-s", "--max-time", "5",
                        url + "/_openlake/metrics"], capture_output=True, text=True, timeout=30)
    return r.stdout


def peer_up(text, peer):
    line = f'openlake_rpc_peer_up{{cluster="c1",peer="{peer}"}} '
    for ln in text.splitlines():
        if ln.startswith(line):
            return int(ln[len(line):])
    return None
