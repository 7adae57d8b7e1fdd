"""Run by test_s3_clients.py in .venv-s3fs: a working session of s3fs
(fsspec) against the daemon at argv[1]. Prints "OK" at the end; any
failed check raises (non-zero exit, traceback on stderr)."""
import hashlib
import os
import sys

import s3fs

url, ak, sk = sys.argv[1:4]
MiB = 1024 * 1024
fs = s3fs.S3FileSystem(key=ak, secret=sk, endpoint_url=url, use_listings_cache=False,
                       client_kwargs={"region_name": "us-east-1"})

fs.mkdir("fsb")
assert "fsb" in [p.rstrip("/") for p in fs.ls("")]
# small files, nested "directories"
fs.pipe("fsb/a/one.txt", b"one")
fs.pipe("fsb/a/b/two.txt", b"two two")
fs.pipe("fsb/top.bin", b"\x00\xff" * 100)
assert fs.cat("fsb/a/one.txt") == b"one"
assert sorted(fs.ls("fsb", detail=False)) == ["fsb/a", "fsb/top.bin"]
assert fs.isdir("fsb/a") and fs.isfile("fsb/a/b/two.txt") and not fs.exists("fsb/nope")
assert sorted(fs.find("fsb")) == ["fsb/a/b/two.txt", "fsb/a/one.txt", "fsb/top.bin"]
assert sorted(fs.glob("fsb/a/**/*.txt")) == ["fsb/a/b/two.txt", "fsb/a/one.txt"]
assert fs.du("fsb") == 3 + 7 + 200
assert fs.info("fsb/a/b/two.txt")["size"] == 7
# a streamed write in 5 MiB blocks: a multipart upload
data = os.urandom(13 * MiB + 11)
with fs.open("fsb/big.bin", "wb", block_size=5 * MiB) as f:
    for i in range(0, len(data), 1 << 20):
        f.write(data[i:i + (1 << 20)])
assert fs.info("fsb/big.bin")["size"] == len(data)
assert fs.info("fsb/big.bin")["ETag"].strip('"').endswith("-3")
# random reads: ranged GETs
with fs.open("fsb/big.bin", "rb", block_size=1 * MiB) as f:
    f.seek(7 * MiB + 5)
    assert f.read(1000) == data[7 * MiB + 5:7 * MiB + 1005]
    f.seek(-10, 2)
    assert f.read() == data[-10:]
assert hashlib.sha256(fs.cat("fsb/big.bin")).digest() == hashlib.sha256(data).digest()
# copy, move, remove
fs.copy("fsb/a/one.txt", "fsb/c/one-copy.txt")
assert fs.cat("fsb/c/one-copy.txt") == b"one"
fs.mv("fsb/top.bin", "fsb/moved.bin")
assert not fs.exists("fsb/top.bin") and fs.cat("fsb/moved.bin") == b"\x00\xff" * 100
fs.rm("fsb/a", recursive=True)
assert sorted(fs.find("fsb")) == ["fsb/big.bin", "fsb/c/one-copy.txt", "fsb/moved.bin"]
# missing things are FileNotFoundError, as for local files
for fn in (lambda: fs.cat("fsb/nope"), lambda: fs.info("fsb/nope"),
           lambda: fs.ls("nobucket")):
    try:
        fn()
        raise AssertionError("expected FileNotFoundError")
    except FileNotFoundError:
        pass
fs.rm("fsb", recursive=True)
assert not fs.exists("fsb")
print("OK")
