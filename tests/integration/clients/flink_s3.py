"""Run by test_s3_bigdata.py in .venv-flink: an Apache Flink streaming job
(PyFlink, local mini cluster) against the daemon at argv[1], bucket argv[4]
already made, Flink's S3 file system (flink-s3-fs-hadoop, put on the
JVM's classpath by the caller through HADOOP_CLASSPATH). Prints "OK" at the
end; any failure raises (non-zero exit).

The job: a generator of ROWS rows (ids 1..ROWS, RATE a second) into a CSV
file sink on s3://bucket/out, checkpointing every 300 ms to
s3://bucket/ckpt. Each open part file is an S3 multipart upload that
Flink's recoverable writer keeps open across checkpoints (parts uploaded
at each one) and completes when the checkpoint that closed it is
confirmed; checkpoint metadata is written and the subsumed checkpoints
deleted. The caller checks what the job left in the bucket.
"""
import sys

from pyflink.common import Configuration
from pyflink.java_gateway import get_gateway
from pyflink.table import EnvironmentSettings, TableEnvironment

url, ak, sk, bucket, rows = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4], int(sys.argv[5])
settings = {
    "execution.checkpointing.interval": "300ms",
    "execution.checkpointing.dir": f"s3://{bucket}/ckpt",
    "state.backend.type": "hashmap",
    "restart-strategy.type": "none",   # a failure ends the job (and the test)
    "parallelism.default": "2",
    "rest.bind-port": "0",
    "s3.endpoint": url,
    "s3.endpoint.region": "us-east-1",
    "s3.path.style.access": "true",
    "s3.connection.ssl.enabled": "false",
    "s3.access-key": ak,
    "s3.secret-key": sk,
    "s3.attempts.maximum": "1",
    "s3.retry.limit": "1",
}
conf = Configuration()
for k, v in settings.items():
    conf.set_string(k, v)
# In a local mini cluster nothing hands Flink's file systems the cluster
# configuration (a real cluster does at start): done here, as it would.
jvm = get_gateway().jvm
jconf = jvm.org.apache.flink.configuration.Configuration()
for k, v in settings.items():
    jconf.setString(k, v)
jvm.org.apache.flink.core.fs.FileSystem.initialize(jconf, None)

t = TableEnvironment.create(
    EnvironmentSettings.new_instance().in_streaming_mode().with_configuration(conf).build())
rate = max(1, rows // 4)   # about four seconds: a dozen checkpoints
t.execute_sql(f"""
    CREATE TABLE src (id BIGINT, name STRING) WITH (
      'connector' = 'datagen', 'rows-per-second' = '{rate}', 'number-of-rows' = '{rows}',
      'fields.id.kind' = 'sequence', 'fields.id.start' = '1', 'fields.id.end' = '{rows}',
      'fields.name.length' = '24')""")
t.execute_sql(f"""
    CREATE TABLE snk (id BIGINT, name STRING) WITH (
      'connector' = 'filesystem', 'path' = 's3://{bucket}/out', 'format' = 'csv',
      'sink.rolling-policy.rollover-interval' = '2s',
      'sink.rolling-policy.check-interval' = '500ms')""")
t.execute_sql("INSERT INTO snk SELECT id, name FROM src").wait()
print("OK")
