"""Tiered storage (KIP-405) against moto's S3 server on loopback, each number next to its
reference measured in the same run:

- **fetch of remote history** through ``seglog serve``: a confluent-kafka consumer reads a
  tiered topic from offset 0 whose closed segments exist only in the object store
  (``local.retention.bytes=0``), against the same records of a local topic. *Cold*: the
  broker restarted with an empty remote cache (every segment downloaded, CRC-checked,
  opened); *warm*: read again, the cache holding them. Goals: warm >= 0.5x, cold >= 0.25x.
- **upload throughput**: ``seglog.storage.tier_sync`` copying the closed segments of a
  log (``.log`` + indexes, CRC-32C, one manifest commit) against the object store's raw
  put rate for the same bytes (one ``put`` per ``.log``, the same client, the uploader's
  concurrency).
  Goal: >= 0.8x.

Prints ``seglog.bench``'s markdown table of medians over ``--repeat`` runs; ``--json FILE``
writes the report (``Report.to_dict``: rows, every sample, settings).

    .venv/bin/python benchmarks/tiered_storage_bench.py                # 64 MiB, 3 repeats
    .venv/bin/python benchmarks/tiered_storage_bench.py --mib 4 --segment-mib 1 --repeat 1
"""

from __future__ import annotations

import argparse
import logging
import os
import shutil
import sys
import tempfile
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import boto3
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from moto.server import ThreadedMotoServer

from seglog.bench import Report, Row, Samples, machine_info
from seglog.broker import BrokerProcess, start_broker
from seglog.storage import Log, LogConfig, Message, RemoteStorage, tier_sync

VALUE_BYTES = 8192
UPLOAD_THREADS = 8
"""Puts in flight for the raw reference: the uploader's (``tier_sync``) concurrency."""
CREDENTIALS = {
    "AWS_ACCESS_KEY_ID": "bench",
    "AWS_SECRET_ACCESS_KEY": "bench",
    "AWS_DEFAULT_REGION": "us-east-1",
}


def _log(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


class Store:
    """moto's S3 server in this process, one bucket per use."""

    def __init__(self) -> None:
        os.environ.update(CREDENTIALS)
        logging.getLogger("werkzeug").setLevel(logging.ERROR)  # moto's access log
        self.server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
        self.server.start()
        host, port = self.server.get_host_and_port()
        self.endpoint = f"http://{host}:{port}"

    def bucket(self) -> str:
        name = f"bench-{uuid.uuid4().hex[:12]}"
        boto3.client("s3", endpoint_url=self.endpoint).create_bucket(Bucket=name)
        return f"s3://{name}/tier"


# -- fetch ---------------------------------------------------------------------------------


def _produce(bootstrap: str, topic: str, count: int) -> None:
    producer = Producer({
        "bootstrap.servers": bootstrap, "linger.ms": 20, "batch.size": 1 << 20,
        "message.max.bytes": 4 << 20, "compression.type": "none", "log_level": 2,
    })  # fmt: skip
    value = os.urandom(VALUE_BYTES)
    for i in range(count):
        while True:
            try:
                producer.produce(topic, value=value, key=b"%d" % i)
                break
            except BufferError:
                producer.poll(0.05)
    assert producer.flush(120) == 0


def _consume(bootstrap: str, topic: str, count: int) -> float:
    """Seconds to read ``count`` records from offset 0 (first poll to last record)."""
    consumer = Consumer({
        "bootstrap.servers": bootstrap, "group.id": f"bench-{uuid.uuid4().hex}",
        "enable.auto.commit": False, "fetch.max.bytes": 64 << 20,
        "max.partition.fetch.bytes": 16 << 20, "fetch.wait.max.ms": 10,
    })  # fmt: skip
    consumer.assign([TopicPartition(topic, 0, 0)])
    got = 0
    start = time.perf_counter()
    deadline = start + 300
    try:
        while got < count:
            for msg in consumer.consume(min(1000, count - got), 0.5):
                if msg.error() is not None:
                    raise RuntimeError(f"fetch {topic}: {msg.error()}")
                got += 1
            if time.perf_counter() > deadline:
                raise RuntimeError(f"read {got} of {count} records of {topic} in 300 s")
        return time.perf_counter() - start
    finally:
        consumer.close()


def _local_start(data: Path, topic: str) -> int:
    bases = sorted(int(p.name[:20]) for p in (data / f"{topic}-0").glob("*.log"))
    return bases[0] if bases else 0


def _fetch_runs(args: argparse.Namespace, store: Store, samples: dict[str, list[float]]) -> None:
    count = args.mib * (1 << 20) // VALUE_BYTES
    tmp = Path(tempfile.mkdtemp(prefix="seglog-tier-bench-"))
    data = tmp / "data"
    flags = [
        "--seglog-remote-storage-url", store.bucket(),
        "--seglog-remote-storage-endpoint-url", store.endpoint,
        "--seglog-remote-cache-bytes", str(4 * args.mib << 20),
        "--message-max-bytes", str(4 << 20),
    ]  # fmt: skip
    broker: BrokerProcess | None = start_broker(data, extra_args=flags)
    try:
        assert broker is not None
        admin = AdminClient({"bootstrap.servers": broker.bootstrap, "log_level": 2})
        common = {"segment.bytes": str(args.segment_mib << 20), "retention.ms": "-1"}
        tiered = {**common, "remote.storage.enable": "true", "local.retention.bytes": "0"}
        futures = admin.create_topics([
            NewTopic("local", 1, 1, config=common), NewTopic("tiered", 1, 1, config=tiered),
        ])  # fmt: skip
        for f in futures.values():
            f.result(30)
        for topic in ("local", "tiered"):
            _produce(broker.bootstrap, topic, count)
        # every closed segment uploaded and gone from local disk
        deadline = time.monotonic() + 300
        last = sorted((data / "local-0").glob("*.log"))[-1].name
        while _local_start(data, "tiered") < int(last[:20]):
            if time.monotonic() > deadline:
                raise RuntimeError("the tiered topic's segments were not uploaded in 300 s")
            time.sleep(0.1)
        remote_records = _local_start(data, "tiered")
        _log(f"{remote_records:,} of {count:,} records only in the tier")
        for r in range(args.repeat):
            broker.stop()
            shutil.rmtree(data / ".remote-cache", ignore_errors=True)  # a cold cache
            broker = start_broker(data, extra_args=flags)
            order = ("local", "cold", "warm") if r % 2 == 0 else ("cold", "warm", "local")
            for what in order:
                topic = "local" if what == "local" else "tiered"
                seconds = _consume(broker.bootstrap, topic, count)
                samples.setdefault(f"fetch {what}", []).append(count * VALUE_BYTES / seconds)
                _log(
                    f"repeat {r + 1} fetch {what}: {count * VALUE_BYTES / seconds / 1e6:,.0f} MB/s"
                )
    finally:
        if broker is not None:
            broker.stop()
        shutil.rmtree(tmp, ignore_errors=True)


# -- upload --------------------------------------------------------------------------------


def _raw_puts(store: Any, keys: list[str], blobs: list[bytes]) -> float:
    """Seconds to put ``blobs`` at ``keys``, ``UPLOAD_THREADS`` at a time."""
    start = time.perf_counter()
    with ThreadPoolExecutor(UPLOAD_THREADS) as pool:
        list(pool.map(store.put, keys, blobs))
    return time.perf_counter() - start


def _upload_runs(args: argparse.Namespace, store: Store, samples: dict[str, list[float]]) -> None:
    tmp = Path(tempfile.mkdtemp(prefix="seglog-tier-upload-"))
    try:
        value = os.urandom(VALUE_BYTES)
        config = LogConfig(segment_bytes=args.segment_mib << 20, remote_storage_enable=True,
                           local_retention_bytes=-1)  # fmt: skip
        count = args.mib * (1 << 20) // VALUE_BYTES
        for r in range(args.repeat):
            remote = RemoteStorage(store.bucket(), store.endpoint, cache_dir=str(tmp / "cache"))
            path = tmp / f"up-{r}"
            with Log.open(path, config, create=True, remote=remote) as log:
                for i in range(0, count, 64):
                    log.publish([Message(value=value) for _ in range(min(64, count - i))])
                segs = log.segments()[:-1]
                nbytes = sum(s.size for s in segs)
                tier = log.remote_tier
                assert tier is not None
                blobs = [(path / f"{s.base_offset:020d}.log").read_bytes() for s in segs]

                # raw put rate: the same bytes, the same client, store and concurrency as
                # the uploader, one put per .log; the two alternate which goes first
                keys = [f"raw/{r}/{i}.log" for i in range(len(blobs))]
                if r % 2:
                    raw = _raw_puts(tier.store, keys, blobs)
                start = time.perf_counter()
                report = tier_sync(log)
                took = time.perf_counter() - start
                if not r % 2:
                    raw = _raw_puts(tier.store, keys, blobs)
                assert report.error is None
                assert len(report.uploaded) == len(segs)
            samples.setdefault("upload tier_sync", []).append(nbytes / took)
            samples.setdefault("upload raw put", []).append(nbytes / raw)
            _log(f"repeat {r + 1} upload: tier_sync {nbytes / took / 1e6:,.0f} MB/s, "
                 f"raw put {nbytes / raw / 1e6:,.0f} MB/s ({len(segs)} segments)")  # fmt: skip
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


# -- table ---------------------------------------------------------------------------------


def _rows(samples: dict[str, list[float]], args: argparse.Namespace) -> list[Row]:
    mb = {k: Samples("MB/s", [v / 1e6 for v in values]) for k, values in samples.items()}
    what = f"{args.mib} MiB in {args.segment_mib} MiB segments"
    local = f"fetch of the same records, local topic ({what})"
    return [
        Row("fetch of remote history from offset 0, warm cache", mb["fetch warm"],
            local, mb["fetch local"], target=0.5),
        Row("fetch of remote history from offset 0, cold cache", mb["fetch cold"],
            local, mb["fetch local"], target=0.25),
        Row(f"upload of closed segments (tier_sync, {what})", mb["upload tier_sync"],
            "raw put of the same .log bytes, same store and concurrency",
            mb["upload raw put"], target=0.8),
    ]  # fmt: skip


def main() -> None:
    """Start moto's S3 server, run both parts ``--repeat`` times, print the medians."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mib", type=int, default=64, help="MiB per topic / log")
    parser.add_argument("--segment-mib", type=int, default=8, help="segment.bytes in MiB")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--json", type=Path, help="write the rows, settings and samples here")
    args = parser.parse_args()
    if args.mib < 2 * args.segment_mib:
        parser.error("--mib must be at least twice --segment-mib (closed segments to tier)")
    started = time.perf_counter()
    store = Store()
    samples: dict[str, list[float]] = {}
    try:
        _fetch_runs(args, store, samples)
        _upload_runs(args, store, samples)
    finally:
        store.server.stop()
    settings = {
        "mib": args.mib,
        "segment_mib": args.segment_mib,
        "value_bytes": VALUE_BYTES,
        "store": "moto[server] S3 on 127.0.0.1 (in the benchmark's process)",
        "repeat": args.repeat,
    }
    report = Report(_rows(samples, args), machine_info(), settings, time.perf_counter() - started)
    print(
        f"{args.mib} MiB of {VALUE_BYTES} B records, {args.segment_mib} MiB segments, moto S3 "
        f"on loopback; medians of {args.repeat}"
    )
    print(report.markdown())
    if args.json:
        report.write_json(args.json)


if __name__ == "__main__":
    main()
