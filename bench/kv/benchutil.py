"""Small helpers shared by the Python KV benchmarks in bench/kv/."""
import socket


def free_ports(n):
    """n distinct free loopback TCP ports (all held bound until each is chosen)."""
    socks = [socket.socket() for _ in range(n)]
    for s in socks:
        s.bind(("127.0.0.1", 0))
    ports = [s.getsockname()[1] for s in socks]
    for s in socks:
        s.close()
    return ports
