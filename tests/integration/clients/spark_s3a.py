"""Run by test_s3_spark.py in .venv-spark: a working session of Apache
Spark's S3A connector (hadoop-aws, the AWS SDK v2) against the daemon at
argv[1], bucket argv[4] already made. argv[5] is the folder of the jars
scripts/deps.sh fetched (hadoop-aws, its SDK bundle, spark-hadoop-cloud).
Prints "OK" at the end; any failed check raises (non-zero exit).

What it drives, as a Spark job would:
- DataFrame writes through Hadoop's classic FileOutputCommitter (task
  files under _temporary/, "renamed" into place: COPY + DELETE, then the
  directory markers and listings S3A makes and reads);
- the S3A magic committer (files written as multipart uploads left open
  under a __magic path, completed at job commit from their .pending
  manifests; the _SUCCESS file names what was committed);
- an overwrite (S3A's bulk delete: DeleteObjects), partitioned output
  (nested prefixes, delimiter listings), paged listings;
- the Hadoop FileSystem API: a 12 MiB stream in 5 MiB multipart blocks,
  seeks (ranged GETs), rename and recursive delete of a directory.
"""
import glob
import hashlib
import json
import os
import sys

from pyspark.sql import SparkSession

url, ak, sk, bucket, jars = sys.argv[1:6]
MiB = 1024 * 1024
base = f"s3a://{bucket}"

spark = (SparkSession.builder.master("local[2]").appName("openlake-s3a")
         .config("spark.jars", ",".join(sorted(glob.glob(os.path.join(jars, "*.jar")))))
         .config("spark.ui.enabled", "false")
         .config("spark.driver.host", "127.0.0.1")          # whatever the host name resolves to
         .config("spark.driver.bindAddress", "127.0.0.1")
         .config("spark.sql.shuffle.partitions", "4")
         .config("spark.hadoop.fs.s3a.endpoint", url)
         .config("spark.hadoop.fs.s3a.endpoint.region", "us-east-1")
         .config("spark.hadoop.fs.s3a.path.style.access", "true")
         .config("spark.hadoop.fs.s3a.connection.ssl.enabled", "false")
         .config("spark.hadoop.fs.s3a.access.key", ak)
         .config("spark.hadoop.fs.s3a.secret.key", sk)
         .config("spark.hadoop.fs.s3a.aws.credentials.provider",
                 "org.apache.hadoop.fs.s3a.SimpleAWSCredentialsProvider")
         .config("spark.hadoop.fs.s3a.multipart.size", "5M")
         .config("spark.hadoop.fs.s3a.paging.maximum", "100")
         .config("spark.hadoop.fs.s3a.attempts.maximum", "1")
         .config("spark.hadoop.fs.s3a.retry.limit", "1")
         .getOrCreate())
spark.sparkContext.setLogLevel("ERROR")
jvm = spark.sparkContext._jvm
conf = spark.sparkContext._jsc.hadoopConfiguration()
Path = jvm.org.apache.hadoop.fs.Path
fs = Path(base + "/").getFileSystem(conf)


def names(prefix):
    return sorted(s.getPath().getName() for s in fs.listStatus(Path(prefix)))


# 1. Parquet through the classic committer (rename = COPY + DELETE).
df = spark.range(0, 100000, numPartitions=4).selectExpr("id", "id * 2 AS twice",
                                                        "cast(id % 7 AS int) AS k")
df.write.mode("overwrite").parquet(base + "/classic")
back = spark.read.parquet(base + "/classic")
assert back.count() == 100000
assert back.selectExpr("sum(twice)").collect()[0][0] == 2 * sum(range(100000))
listed = names(base + "/classic")
assert "_SUCCESS" in listed and "_temporary" not in listed, listed
assert sum(n.endswith(".parquet") for n in listed) == 4, listed

# 2. An overwrite: the old files are deleted (S3A's bulk DeleteObjects).
spark.range(0, 10, numPartitions=2).selectExpr("id", "id AS twice", "0 AS k") \
    .write.mode("overwrite").parquet(base + "/classic")
back = spark.read.parquet(base + "/classic")
assert back.count() == 10 and back.selectExpr("sum(twice)").collect()[0][0] == 45
assert sum(n.endswith(".parquet") for n in names(base + "/classic")) == 2

# 3. Partitioned CSV through the magic committer: every file is a
# multipart upload completed only at job commit.
spark.conf.set("spark.sql.sources.commitProtocolClass",
               "org.apache.spark.internal.io.cloud.PathOutputCommitProtocol")
spark.conf.set("spark.sql.parquet.output.committer.class",
               "org.apache.spark.internal.io.cloud.BindingParquetOutputCommitter")
conf.set("fs.s3a.committer.name", "magic")
conf.set("fs.s3a.committer.magic.enabled", "true")
conf.set("mapreduce.outputcommitter.factory.scheme.s3a",
         "org.apache.hadoop.fs.s3a.commit.S3ACommitterFactory")
df.write.mode("overwrite").partitionBy("k").option("header", "true").csv(base + "/magic")
parts = names(base + "/magic")
assert [p for p in parts if p.startswith("k=")] == [f"k={i}" for i in range(7)], parts
assert not any(p.startswith("__magic") for p in parts), parts
succ = fs.open(Path(base + "/magic/_SUCCESS"))
manifest = json.loads(jvm.org.apache.commons.io.IOUtils.toString(succ, "UTF-8"))
succ.close()
assert manifest["committer"] == "magic", manifest
assert len(manifest["filenames"]) >= 7, manifest
csv = spark.read.option("header", "true").option("inferSchema", "true").csv(base + "/magic")
assert csv.count() == 100000
rows = {r["k"]: r["n"] for r in csv.groupBy("k").count().withColumnRenamed("count", "n").collect()}
assert rows == {i: len(range(i, 100000, 7)) for i in range(7)}, rows
# and again with parquet (BindingParquetOutputCommitter), appended
df.where("k = 3").write.mode("append").parquet(base + "/magicpq")
df.where("k = 4").write.mode("append").parquet(base + "/magicpq")
assert spark.read.parquet(base + "/magicpq").count() == len(range(3, 100000, 7)) + \
    len(range(4, 100000, 7))

# 4. The FileSystem API: a 12 MiB stream in 5 MiB blocks (multipart).
blob = hashlib.shake_256(b"openlake-spark").digest(12 * MiB + 333)
out = fs.create(Path(base + "/raw/big.bin"), True)
for i in range(0, len(blob), MiB):
    out.write(bytearray(blob[i:i + MiB]))
out.close()
st = fs.getFileStatus(Path(base + "/raw/big.bin"))
assert st.getLen() == len(blob) and st.isFile()
inp = fs.open(Path(base + "/raw/big.bin"))
IOUtils = jvm.org.apache.commons.io.IOUtils
for off in (11 * MiB + 100, 0, 5 * MiB - 7, len(blob) - 50):   # backwards too
    n = min(1000, len(blob) - off)
    inp.seek(off)
    assert bytes(IOUtils.toByteArray(inp, n)) == blob[off:off + n], off
inp.close()

# 5. Many small files: paged listings (100 keys a page), a directory
# rename (COPY + DELETE of every file) and a recursive delete.
for i in range(250):
    o = fs.create(Path(f"{base}/many/f{i:04d}"), True)
    o.write(bytearray(b"x" * (i % 5)))
    o.close()
assert len(names(base + "/many")) == 250
assert fs.rename(Path(base + "/many"), Path(base + "/moved"))
assert not fs.exists(Path(base + "/many"))
moved = fs.listStatus(Path(base + "/moved"))
assert len(moved) == 250 and sum(s.getLen() for s in moved) == sum(i % 5 for i in range(250))
assert fs.delete(Path(base + "/moved"), True)
assert not fs.exists(Path(base + "/moved"))

spark.stop()
print("OK")
