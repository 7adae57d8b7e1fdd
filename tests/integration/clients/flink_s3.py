"""Run by test_s3_bigdata.py in .venv-flink: an Apache Flink streaming job
(PyFlink, local mini cluster) against the daemon at argv[1], bucket argv[4]
already made, Flink's S3 file system (flink-s3-fs-hadoop, put on the
JVM's classpath by the caller through HADOOP_CLASSPATH). Prints "OK" at the
end; any failure raises (non-zero exit).

The job: a generator of ROWS rows (ids 1..ROWS, over about four seconds)
into Flink's FileSink on s3://bucket/out (row format, one part file per
subtask that rolls only at the end of the input), checkpointing every
300 ms to s3://bucket/ckpt. Each part file is an S3 multipart upload kept
open across all the checkpoints: at each one the sink stores what the file
holds past its uploaded parts as a separate object (PUT, HEAD, later
DELETE) and records the upload in the checkpoint; at the end it uploads the
part and completes the upload. The caller checks what the job left.

With argv[6] (a path that does not exist yet), the job fails once half-way
(a Python function raises at id ROWS/2, after creating that file) and is
restarted from its last checkpoint: the sink resumes the open uploads from
what the checkpoint recorded (the stored tail read back), drops what was
written after it, and the output must still hold every row exactly once.
Lines are Flink's text form of a row: "+I[<id>, <name>]".
"""
import os
import sys

from pyflink.common import Configuration, Encoder
from pyflink.datastream import StreamExecutionEnvironment
from pyflink.datastream.connectors.file_system import FileSink, RollingPolicy
from pyflink.java_gateway import get_gateway
from pyflink.table import StreamTableEnvironment

url, ak, sk, bucket, rows = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4], int(sys.argv[5])
marker = sys.argv[6] if len(sys.argv) > 6 else None
settings = {
    "execution.checkpointing.interval": "300ms",
    "execution.checkpointing.dir": f"s3://{bucket}/ckpt",
    "state.backend.type": "hashmap",
    # a failure ends the job (and the test); the one planned failure is retried once
    "restart-strategy.type": "fixed-delay" if marker else "none",
    "restart-strategy.fixed-delay.attempts": "1",
    "restart-strategy.fixed-delay.delay": "200ms",
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

env = StreamExecutionEnvironment.get_execution_environment(conf)
t = StreamTableEnvironment.create(env)
rate = max(1, rows // 4)   # about four seconds: a dozen checkpoints
t.execute_sql(f"""
    CREATE TABLE src (id BIGINT, name STRING) WITH (
      'connector' = 'datagen', 'rows-per-second' = '{rate}', 'number-of-rows' = '{rows}',
      'fields.id.kind' = 'sequence', 'fields.id.start' = '1', 'fields.id.end' = '{rows}',
      'fields.name.length' = '24')""")
query = "SELECT id, name FROM src"
if marker:
    from pyflink.table import DataTypes
    from pyflink.table.udf import udf

    @udf(result_type=DataTypes.BIGINT())
    def fail_once(i):
        if i == rows // 2 and not os.path.exists(marker):
            open(marker, "w").close()
            raise RuntimeError("planned failure at id %d" % i)
        return i

    t.create_temporary_function("fail_once", fail_once)
    query = "SELECT fail_once(id) AS id, name FROM src"
never = 3600 * 1000   # ms: no rolling by time or inactivity, nor by size below
sink = (FileSink.for_row_format(f"s3://{bucket}/out", Encoder.simple_string_encoder())
        .with_rolling_policy(RollingPolicy.default_rolling_policy(
            part_size=1 << 30, rollover_interval=never, inactivity_interval=never))
        .build())
t.to_data_stream(t.sql_query(query)).sink_to(sink)
env.execute("openlake-s3-file-sink")
assert not marker or os.path.exists(marker), "the planned failure did not happen"
print("OK")
