"""Black-box tests of openlaked's directories at start (docs/configuration.md,
"Data directories at start"): every data dir and KV disk dir is locked
before anything in it is read, so a second openlaked on one exits 2 naming
the holder's pid and changes nothing; the lock goes with its process (clean
stop or kill -9); a missing directory is made only where its parent exists.
"""
import os
import signal
import stat

from test_daemon import run_openlaked
from test_http import hermetic_openlake_env
from test_kv import wait_kv
from test_s3 import AK, SK, client

assert hermetic_openlake_env  # autouse fixture, imported to apply here too

CREDS = {"OPENLAKE_ACCESS_KEY": AK, "OPENLAKE_SECRET_KEY": SK}


def tree(*roots):
    """Every path under roots (roots included) with its type, size and mtime."""
    out = {}
    for root in roots:
        for dirpath, dirnames, filenames in os.walk(root):
            for name in [""] + dirnames + filenames:
                p = os.path.join(dirpath, name) if name else dirpath
                st = os.lstat(p)
                out[p] = (stat.S_IFMT(st.st_mode), st.st_size, st.st_mtime_ns)
    return out


def refused(d, timeout=15):
    """Starts d, which must exit 2 on its own; returns its stderr."""
    d.start(wait=False)
    rc = d.proc.wait(timeout)
    d.stop(expect_rc=2)
    assert rc == 2, d.stderr()
    return d.stderr()


def drives(tmp_path, n=2):
    out = [tmp_path / f"drive{i}" for i in range(n)]
    for dr in out:
        dr.mkdir()
    return out


def dirs_args(ds, sock):
    return ["--data-dirs", ",".join(map(str, ds)), "--kv-socket", str(sock)]


def test_second_daemon_on_the_data_dirs_exits_2_and_touches_nothing(make_daemon, tmp_path):
    ds = drives(tmp_path)
    a = make_daemon(args=dirs_args(ds, tmp_path / "a.sock"), env=CREDS)
    c = client(a)
    c.create_bucket(Bucket="bkt")
    c.put_object(Bucket="bkt", Key="first", Body=b"1")
    assert (ds[0] / ".openlake.lock").read_text() == f"{a.pid()}\n"
    assert (ds[1] / ".openlake.lock").read_text() == f"{a.pid()}\n"
    before = tree(*ds)

    b = make_daemon(args=dirs_args(ds, tmp_path / "b.sock"), env=CREDS, start=False)
    err = refused(b)
    assert f"openlaked: data dir {ds[0]} is in use by openlaked pid {a.pid()}" in err, err
    assert "listing indexes" not in err and "started" not in err, err   # nothing opened
    assert tree(*ds) == before
    assert not (tmp_path / "b.sock").exists()
    assert not b.data.exists()          # conftest's own --data-dirs, replaced: not made

    # the first daemon serves on, and its listing has every key
    c.put_object(Bucket="bkt", Key="second", Body=b"2")
    assert c.get_object(Bucket="bkt", Key="first")["Body"].read() == b"1"
    keys = [o["Key"] for o in c.list_objects_v2(Bucket="bkt")["Contents"]]
    assert keys == ["first", "second"]


def test_second_daemon_on_a_kv_disk_dir_exits_2_and_touches_nothing(make_daemon, tmp_path):
    kvdir = tmp_path / "nvme0"
    kvdir.mkdir()
    disk = ["--kv-disk.capacity-gb", "0.01", "--kv-disk.dirs", str(kvdir)]
    a = make_daemon(args=["--mode", "kv", "--kv-socket", str(tmp_path / "a.sock"), *disk],
                    start=False)
    a.kv_sock = str(tmp_path / "a.sock")
    a.start(wait=False)
    wait_kv(a)
    assert (kvdir / "kv-disk").is_dir()
    assert (kvdir / ".openlake.lock").read_text() == f"{a.pid()}\n"
    before = tree(kvdir, a.data)

    b = make_daemon(args=["--mode", "kv", "--kv-socket", str(tmp_path / "b.sock"), *disk],
                    start=False)
    err = refused(b)
    assert f"openlaked: KV disk dir {kvdir} is in use by openlaked pid {a.pid()}" in err, err
    assert tree(kvdir, a.data) == before
    # its own data dir (missing, its parent there) is checked, not made: the
    # locks on what exists come first
    assert not b.data.exists()
    assert not (tmp_path / "b.sock").exists()
    assert a.proc.poll() is None


def test_lock_goes_with_a_clean_stop_and_with_kill_9(make_daemon, tmp_path):
    ds = drives(tmp_path)
    a = make_daemon(args=dirs_args(ds, tmp_path / "a.sock"), env=CREDS)
    client(a).create_bucket(Bucket="bkt")
    client(a).put_object(Bucket="bkt", Key="k", Body=b"a")
    a.stop()
    # the lock file stays, naming a process that has ended: it blocks nothing
    assert (ds[0] / ".openlake.lock").read_text() == f"{a.pid()}\n"
    b = make_daemon(args=dirs_args(ds, tmp_path / "b.sock"), env=CREDS)
    assert (ds[0] / ".openlake.lock").read_text() == f"{b.pid()}\n"
    assert client(b).get_object(Bucket="bkt", Key="k")["Body"].read() == b"a"
    client(b).put_object(Bucket="bkt", Key="k2", Body=b"b")

    b.proc.send_signal(signal.SIGKILL)
    b.proc.wait()
    b.stop(expect_rc=None)
    c = make_daemon(args=dirs_args(ds, tmp_path / "c.sock"), env=CREDS)
    assert (ds[1] / ".openlake.lock").read_text() == f"{c.pid()}\n"
    keys = [o["Key"] for o in client(c).list_objects_v2(Bucket="bkt")["Contents"]]
    assert keys == ["k", "k2"]


def test_a_dir_that_is_both_data_and_kv_disk_dir_is_locked_once(make_daemon, tmp_path):
    d = make_daemon(start=False)
    d.args += ["--kv-disk.capacity-gb", "0.01", "--kv-disk.dirs", str(d.data)]
    d.start()
    assert (d.data / "kv-disk").is_dir()
    assert (d.data / ".openlake.lock").read_text() == f"{d.pid()}\n"


def test_missing_data_dir_with_missing_parent_exits_2_and_makes_nothing(tmp_path):
    ok, typo = tmp_path / "new", tmp_path / "typo" / "d2"
    r = run_openlaked("--data-dirs", f"{ok},{typo}", "--threads", "1", "--s3-addr",
                      "127.0.0.1:1", "--kv-addr", "127.0.0.1:2", cwd=tmp_path)
    assert r.returncode == 2, r.stderr
    assert (f"openlaked: data dir {typo} does not exist and neither does its parent "
            f"{typo.parent}") in r.stderr, r.stderr
    # every dir is checked before any is made
    assert sorted(os.listdir(tmp_path)) == []

    kv = tmp_path / "mnt" / "nvme0"
    r = run_openlaked("--data-dirs", str(ok), "--threads", "1", "--kv-disk.capacity-gb", "0.01",
                      "--kv-disk.dirs", str(kv), cwd=tmp_path)
    assert r.returncode == 2, r.stderr
    assert f"KV disk dir {kv} does not exist and neither does its parent {kv.parent}" in r.stderr
    assert sorted(os.listdir(tmp_path)) == []


def test_missing_dirs_with_their_parent_are_made_and_logged(make_daemon, tmp_path):
    d1, d2 = tmp_path / "d1", tmp_path / "d2"
    d = make_daemon(args=["--data-dirs", f"{d1},{d2}"], env=CREDS)
    for x in (d1, d2):
        assert x.is_dir() and stat.S_IMODE(x.stat().st_mode) == 0o700
        assert f"data dir {x} did not exist: created it (its parent {tmp_path} exists)" \
            in d.stderr(), d.stderr()
    c = client(d)
    c.create_bucket(Bucket="bkt")
    c.put_object(Bucket="bkt", Key="k", Body=b"x")
    d.stop()
    d.start()
    assert d.stderr().count("did not exist") == 0     # stderr is per start: none made now
    assert client(d).get_object(Bucket="bkt", Key="k")["Body"].read() == b"x"


def test_data_dir_that_is_a_file_exits_2(tmp_path):
    f = tmp_path / "file"
    f.write_text("x")
    r = run_openlaked("--data-dirs", str(f), "--threads", "1", cwd=tmp_path)
    assert r.returncode == 2, r.stderr
    assert f"data dir {f}: it or its parent" in r.stderr and "not a directory" in r.stderr
    assert f.read_text() == "x"


def test_no_data_dir_named_uses_dot_data_else_the_per_user_one(make_daemon, tmp_path):
    """data_dirs named nowhere: ./data where openlaked starts, if it is there,
    else $XDG_DATA_HOME/openlake (parents made, 0700), else
    ~/.local/share/openlake; `openlake kv` from any directory finds the
    socket by the same rule."""
    from test_cli_kv import cli

    def start(env):
        d = make_daemon(start=False, env={**env, **CREDS})
        i = d.args.index("--data-dirs")
        del d.args[i:i + 2]
        return d.start()

    def banner_dir(d):
        for line in iter(d.proc.stdout.readline, ""):
            if line.startswith("  data dir:"):
                return line.split(":", 1)[1].strip()
        raise AssertionError(d.stderr())

    xdg = tmp_path / "x" / "y"                  # neither there yet
    # A start that fails on another directory makes nothing, parents included.
    bad = make_daemon(start=False, env={"XDG_DATA_HOME": str(xdg), **CREDS},
                      args=["--kv-disk.capacity-gb", "1",
                            "--kv-disk.dirs", str(tmp_path / "no" / "such" / "kvdisk")])
    i = bad.args.index("--data-dirs")
    del bad.args[i:i + 2]
    assert "KV disk dir" in refused(bad)
    assert not (tmp_path / "x").exists()
    a = start({"XDG_DATA_HOME": str(xdg)})
    want = xdg / "openlake"
    assert banner_dir(a) == str(want)
    assert (want / "kv.sock").exists() and (want / "kv.token").exists()
    assert stat.S_IMODE(os.stat(xdg).st_mode) == 0o700
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    env = {"XDG_DATA_HOME": str(xdg)}
    r = cli("kv", "put", "k", "--value", "per-user", env=env, cwd=elsewhere)
    assert r.returncode == 0, r.stderr
    r = cli("kv", "get", "k", env=env, cwd=tmp_path)
    assert (r.returncode, r.stdout) == (0, b"per-user"), r.stderr
    (elsewhere / "data").mkdir()                # a project's own ./data, no daemon in it
    r = cli("kv", "get", "k", env=env, cwd=elsewhere)
    assert (r.returncode, r.stdout) == (0, b"per-user"), r.stderr
    a.stop()

    home = tmp_path / "home"
    home.mkdir()
    b = start({"XDG_DATA_HOME": "not/absolute", "HOME": str(home)})   # a relative one is ignored
    assert banner_dir(b) == str(home / ".local" / "share" / "openlake")
    b.stop()

    c = make_daemon(start=False, env={"XDG_DATA_HOME": str(xdg), **CREDS})
    (c.tmp / "data").mkdir()
    i = c.args.index("--data-dirs")
    del c.args[i:i + 2]
    c.start()
    assert banner_dir(c) == "./data"
    assert (c.tmp / "data" / "kv.sock").exists()
    c.stop()
