"""kv_connector_extra_config of OpenLakeConnector: parsed and checked once at
start-up (every error names its key), and the node addresses it resolves to."""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any


_DEVICES = ("local", "tcp", "ucx")


@dataclass(frozen=True)
class OpenLakeConfig:
    nodes: tuple[str, ...]
    device: str = "local"
    socket: str | None = None
    token: str | None = None
    token_file: str | None = None
    namespace: str = "vllm"
    timeout_ms: int = 5000
    max_pending_save_mb: int = 2048
    save_decode: bool = True
    reconnect_secs: float = 1.0
    load_failure_policy: str = "recompute"
    populate_gb: float = 16.0
    load_part_mb: float = 32.0

    _KEYS = {
        "openlake_nodes": "a non-empty list of \"host:port\" KV addresses "
                          "(\"ucx\": the nodes' kv_ucx_addr)",
        "openlake_device": "one of \"local\", \"tcp\", \"ucx\"",
        "openlake_socket": "the KV Unix socket path of the local openlaked",
        "openlake_token": "the KV token",
        "openlake_token_file": "a file holding the KV token",
        "openlake_namespace": "a namespace prefix, 1..64 printable characters",
        "openlake_timeout_ms": "an integer from 100 to 600000",
        "openlake_max_pending_save_mb": "an integer from 0 to 1048576",
        "openlake_save_decode": "true or false",
        "openlake_reconnect_secs": "a number from 0.05 to 600",
        "openlake_load_failure_policy": "\"recompute\" or \"fail\"",
        "openlake_populate_gb": "a number from 0 to 1048576",
        "openlake_load_part_mb": "a number from 0.01 to 1024",
    }

    @classmethod
    def from_extra(cls, extra: dict[str, Any] | None) -> "OpenLakeConfig":
        extra = dict(extra or {})

        def bad(key: str, why: str = "") -> ValueError:
            got = repr(extra.get(key))
            return ValueError(
                f"kv_connector_extra_config[{key!r}] must be {cls._KEYS[key]}"
                f"{'; ' + why if why else ''} (got {got})")

        unknown = sorted(k for k in extra if k.startswith("openlake_") and k not in cls._KEYS)
        if unknown:
            raise ValueError(
                f"kv_connector_extra_config: unknown key(s) {', '.join(unknown)}; "
                f"known: {', '.join(sorted(cls._KEYS))}")
        nodes = extra.get("openlake_nodes", ["127.0.0.1:9400"])
        if isinstance(nodes, str):
            nodes = [nodes]
        if (not isinstance(nodes, (list, tuple)) or not nodes
                or not all(isinstance(n, str) and _parse_hostport(n) for n in nodes)):
            raise bad("openlake_nodes")
        if len(set(nodes)) != len(nodes):
            raise bad("openlake_nodes", "an address is listed twice")
        device = extra.get("openlake_device", "local")
        if device not in _DEVICES:
            raise bad("openlake_device")

        def opt_str(key: str) -> str | None:
            v = extra.get(key)
            if v is None:
                return None
            if not isinstance(v, str) or not v:
                raise bad(key)
            return v

        def num(key: str, default, lo, hi, kind=int):
            v = extra.get(key, default)
            if isinstance(v, bool) or not isinstance(v, (int, float)) or \
                    (kind is int and int(v) != v) or not lo <= v <= hi:
                raise bad(key)
            return kind(v)

        ns = extra.get("openlake_namespace", "vllm")
        if (not isinstance(ns, str) or not 1 <= len(ns) <= 64
                or not all(33 <= ord(ch) < 127 for ch in ns)):
            raise bad("openlake_namespace")
        save_decode = extra.get("openlake_save_decode", True)
        if not isinstance(save_decode, bool):
            raise bad("openlake_save_decode")
        policy = extra.get("openlake_load_failure_policy", "recompute")
        if policy not in ("recompute", "fail"):
            raise bad("openlake_load_failure_policy")
        if opt_str("openlake_token") and opt_str("openlake_token_file"):
            raise bad("openlake_token", "give openlake_token or openlake_token_file, not both")
        return cls(
            nodes=tuple(nodes), device=device, socket=opt_str("openlake_socket"),
            token=opt_str("openlake_token"), token_file=opt_str("openlake_token_file"),
            namespace=ns,
            timeout_ms=num("openlake_timeout_ms", 5000, 100, 600000),
            max_pending_save_mb=num("openlake_max_pending_save_mb", 2048, 0, 1 << 20),
            save_decode=save_decode,
            reconnect_secs=num("openlake_reconnect_secs", 1.0, 0.05, 600.0, float),
            load_failure_policy=policy,
            populate_gb=num("openlake_populate_gb", 16.0, 0, 1 << 20, float),
            load_part_mb=num("openlake_load_part_mb", 32.0, 0.01, 1024.0, float))


def _per_user_data_dir() -> str | None:
    xdg = os.environ.get("XDG_DATA_HOME", "")
    if xdg.startswith("/"):            # the XDG spec: a relative one is ignored
        return os.path.join(xdg, "openlake")
    home = os.environ.get("HOME", "")
    if home.startswith("/"):
        return os.path.join(home, ".local", "share", "openlake")
    return None


def default_data_dir() -> str:
    """openlaked's data dir when its config names none: ./data where that
    directory exists, else $XDG_DATA_HOME/openlake (an absolute XDG_DATA_HOME
    only), else ~/.local/share/openlake. The daemon's rule (src/base/datadir.h)."""
    if os.path.isdir("data"):
        return "./data"
    return _per_user_data_dir() or "./data"


def find_in_data_dir(name: str) -> str:
    """Where a client finds the daemon's file `name` (kv.sock) when told nothing:
    in default_data_dir(); but when that is ./data and lacks it, the per-user
    dir's if that exists (a project's own ./data folder does not hide a per-user
    daemon). The CLI's rule too (ol_datadir_find)."""
    path = os.path.join(default_data_dir(), name)
    if path.startswith("./data/") and not os.path.lexists(path):
        alt = _per_user_data_dir()
        if alt and os.path.lexists(os.path.join(alt, name)):
            return os.path.join(alt, name)
    return path


def _parse_hostport(s: str) -> bool:
    host, sep, port = s.rpartition(":")
    return bool(sep and host and port.isdigit() and 1 <= int(port) <= 65535)


def _resolve_addrs(cfg: OpenLakeConfig) -> list[tuple[str, str | None, str | None]]:
    """One (addr, token, token_file) per node.  device "local" uses the Unix socket
    (shared memory); its token defaults to kv.token beside the socket."""
    token, token_file = cfg.token, cfg.token_file
    if token is None and token_file is None:
        token = os.environ.get("OPENLAKE_KV_TOKEN") or None
        token_file = os.environ.get("OPENLAKE_KV_TOKEN_FILE") or None
        if token and token_file:
            raise ValueError("OPENLAKE_KV_TOKEN and OPENLAKE_KV_TOKEN_FILE are both set; "
                             "unset one")
    if cfg.device == "local":
        sock = cfg.socket or os.environ.get("OPENLAKE_KV_SOCKET") or None
        if sock is None:
            guess = find_in_data_dir("kv.sock")
            if os.path.exists(guess):
                sock = os.path.abspath(guess)
        if sock is None:
            raise ValueError(
                "kv_connector_extra_config['openlake_socket'] is needed with "
                "openlake_device \"local\": the path of openlaked's KV Unix socket "
                "(kv_socket in its config; by default kv.sock in its first data dir), "
                "or set OPENLAKE_KV_SOCKET, or use openlake_device \"tcp\"; "
                f"there is no {guess} (is openlaked running, started with its "
                "default data dir?)")
        if len(cfg.nodes) > 1:
            raise ValueError(
                "kv_connector_extra_config['openlake_nodes']: openlake_device \"local\" "
                "takes one node (this host); list several nodes with \"tcp\"")
        if token is None and token_file is None:
            token_file = os.path.join(os.path.dirname(sock), "kv.token")
        return [(sock, token, token_file)]
    if token is None and token_file is None:
        raise ValueError(
            "kv_connector_extra_config['openlake_token'] or ['openlake_token_file'] is "
            f"needed with openlake_device \"{cfg.device}\" (openlaked's kv_token; by default "
            "kv.token in its first data dir), or set OPENLAKE_KV_TOKEN_FILE or "
            "OPENLAKE_KV_TOKEN")
    return [(client_addr(cfg, n), token, token_file) for n in cfg.nodes]


def client_addr(cfg: OpenLakeConfig, node: str) -> str:
    """The client's address of a node's host:port: "ucx://host:port" with
    openlake_device "ucx" (its kv_ucx_addr: UCX stream endpoints), else as is."""
    return "ucx://" + node if cfg.device == "ucx" else node
