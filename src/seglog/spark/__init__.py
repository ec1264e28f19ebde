"""PySpark data source ``seglog``: Spark's Kafka source and sink over seglog topics.

Use it in any SparkSession once seglog is installed (pyspark >= 4; the top-level module
``pyspark_seglog`` registers it automatically), or register it explicitly::

    import seglog.spark
    seglog.spark.register(spark)
    df = (spark.read.format("seglog").option("subscribe", "events")
          .option("startingOffsets", "earliest").load("data"))

Schema (Spark's Kafka source): ``key binary, value binary, topic string, partition int,
offset long, timestamp timestamp, timestampType int``; ``headers array<struct<key string,
value binary>>`` with ``includeHeaders=true``.

Read options: ``path`` (or ``load(path)``): a data directory, opened read-only (no lock: it
may be a running broker's); one of ``subscribe`` (comma list), ``subscribePattern`` (regex,
full match), ``assign`` (``{"topic": [0, 1]}``); ``startingOffsets`` / ``endingOffsets``
(``earliest``, ``latest`` or ``{"topic": {"0": 23}}`` with -2 earliest, -1 latest; partitions
left out start at earliest, end at latest; batch default earliest→latest, streaming default
latest); ``startingTimestamp`` / ``startingOffsetsByTimestamp`` (ms; the first record at or
after it; that precedence over ``startingOffsets``, as Spark's) with
``startingOffsetsByTimestampStrategy`` (``error`` | ``latest``); ``endingTimestamp`` /
``endingOffsetsByTimestamp`` (batch); ``maxOffsetsPerTrigger``; ``minOffsetsPerTrigger``
with ``maxTriggerDelay`` (default ``15m``); ``includeHeaders``; ``failOnDataLoss`` (default
true: offsets below the log start offset raise; false skips to the log start);
``minPartitions``; ``checkCrcs`` (default true, as Kafka's ``check.crcs``: a stored or
fetched batch whose CRC-32C does not match fails the task with CorruptRecordError naming
its offset; false skips the check). Or ``kafka.bootstrap.servers`` instead of ``path``:
the same reads through any Kafka-protocol broker (Fetch into the numpy decoder over
PLAINTEXT, TLS and SASL PLAIN/SCRAM; other ``kafka.*`` options: a confluent-kafka consumer;
security options below). Streaming offsets are checkpointed as ``{"topic": {"partition":
next offset}}``. ``read_topic(spark, path, topic, ...)``: a batch read that scans the
topic's Parquet mirrors natively (``seglog.columnar``).

Typed columns (``seglog.spark._typed``): ``valueFormat`` / ``keyFormat`` = ``avro`` | ``json``
| ``protobuf`` make ``value`` / ``key`` a struct of the registered schema's fields
(Confluent's wire format), with ``schema.registry.url`` (default: the broker's own registry,
or the data directory's ``_schemas``), ``valueSchemaSubject`` / ``valueSchemaVersion``
(``valueSchemaMessage`` for Protobuf),
``mode`` (PERMISSIVE, FAILFAST) and ``columnNameOfCorruptRecord``; the sink encodes a
struct column with ``valueFormat`` = ``avro`` | ``json`` | ``protobuf`` (``auto.register.schemas``,
``_typed_write``).

Write options: ``topic`` (or a ``topic`` column); ``path`` (data directory) or
``kafka.bootstrap.servers``; ``partitions`` (count for a topic created by the sink, default
1); ``compression`` (none, gzip, snappy, lz4, zstd; path mode). Columns: ``value`` (binary or
string, required), ``key``, ``headers``, ``partition``. Path mode stages record batches and
appends them in the driver-side commit, exactly once per micro-batch (``seglog.spark._stage``
explains the protocol); it needs the data directory's writer lock, so it cannot write into
the directory of a running broker — write through the broker with ``kafka.bootstrap.servers``
(at-least-once, like Spark's Kafka sink).

Security options (wire reads and the sink; ``seglog.spark._security``): Spark's
``kafka.security.protocol`` (PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL) and
``kafka.sasl.mechanism`` (PLAIN, SCRAM-SHA-256, SCRAM-SHA-512; also ``kafka.sasl.mechanisms``);
credentials as ``kafka.sasl.jaas.config`` (``org.apache.kafka.common.security.scram.
ScramLoginModule required username="u" password="p";`` or the ``PlainLoginModule``) or
``kafka.sasl.username`` / ``kafka.sasl.password`` (``kafka.sasl.plain.username`` /
``kafka.sasl.plain.password``); CA certificates as PEM with ``kafka.ssl.ca.location``,
``kafka.ssl.cafile`` or ``kafka.ssl.truststore.location`` + ``kafka.ssl.truststore.type=PEM``
(a JKS truststore is Java-only and refused); a client certificate with
``kafka.ssl.certificate.location`` / ``kafka.ssl.key.location`` / ``kafka.ssl.key.password``
(``kafka.ssl.certfile`` / ``kafka.ssl.keyfile`` / ``kafka.ssl.password``, or a PEM
``kafka.ssl.keystore.location``); ``kafka.ssl.endpoint.identification.algorithm`` ``https``
(default) or ``none``. Other ``kafka.*`` options pass through to librdkafka. A refused
login fails within about a second with the broker's reason.
"""

from __future__ import annotations

from typing import Any

from seglog.columnar import decode_batches
from seglog.spark._read_topic import read_topic
from seglog.spark._schema import arrow_schema, spark_schema
from seglog.spark._source import SeglogDataSource

__all__ = [
    "SeglogDataSource",
    "arrow_schema",
    "decode_batches",
    "read_topic",
    "register",
    "spark_schema",
]


def register(spark: Any) -> None:
    """Register ``format("seglog")`` in ``spark`` (a ``pyspark.sql.SparkSession``).

    Executors import ``seglog`` by name: it must be installed where Spark's Python workers run.
    """
    spark.dataSource.register(SeglogDataSource)
