"""Kafka transactions against one ``seglog serve``, each next to its reference measured in
the same run (confluent-kafka / librdkafka clients, 1 partition):

- **transactional produce**: N records (default 100,000 x 1 KiB) written by a
  transactional producer committing every ``--per-txn`` records (default 1,000), against
  an idempotent producer writing the same records. Goal: >= 0.8x.
- **read_committed fetch**: a consumer with ``isolation.level=read_committed`` reading
  the transactional topic (every transaction committed, one marker each), against
  ``read_uncommitted`` reading the same topic. Goal: >= 0.9x.

Each repeat writes fresh topics and measures both sides in turn (which goes first
alternates between repeats); the table has the medians (records/s). ``--json FILE``
writes the rows, the settings and every sample.

    .venv/bin/python benchmarks/transactions_bench.py                 # 3 repeats
    .venv/bin/python benchmarks/transactions_bench.py --records 2000 --repeat 1
"""

from __future__ import annotations

import argparse
import json
import shlex
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from seglog.broker import start_broker

TIMEOUT_S = 120.0


def _log(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


def _produce(bootstrap: str, topic: str, n: int, value: bytes, per_txn: int) -> float:
    """records/s writing ``n`` records (after one warm-up record); ``per_txn`` > 0:
    transactional, committing every ``per_txn`` records, else idempotent."""
    conf: dict[str, Any] = {"bootstrap.servers": bootstrap, "linger.ms": 5}
    if per_txn:
        conf["transactional.id"] = f"bench-{topic}"
    else:
        conf["enable.idempotence"] = True
    producer = Producer(conf)
    if per_txn:  # producer id, connections and metadata before the clock starts
        producer.init_transactions(TIMEOUT_S)
        producer.begin_transaction()
        producer.produce(topic, value=value, partition=0)
        producer.commit_transaction(TIMEOUT_S)
    else:
        producer.produce(topic, value=value, partition=0)
        producer.flush(TIMEOUT_S)
    started = time.perf_counter()
    if per_txn:
        for first in range(0, n, per_txn):
            producer.begin_transaction()
            for _ in range(min(per_txn, n - first)):
                producer.produce(topic, value=value, partition=0)
                producer.poll(0)
            producer.commit_transaction(TIMEOUT_S)
    else:
        for _ in range(n):
            while True:
                try:
                    producer.produce(topic, value=value, partition=0)
                    break
                except BufferError:
                    producer.poll(0.01)
            producer.poll(0)
        if producer.flush(TIMEOUT_S) != 0:
            raise RuntimeError("idempotent produce did not finish")
    return n / (time.perf_counter() - started)


def _fetch(bootstrap: str, topic: str, n: int, isolation: str) -> float:
    """records/s reading the first ``n`` records of ``topic`` with ``isolation``."""
    consumer = Consumer({
        "bootstrap.servers": bootstrap, "group.id": f"bench-{isolation}-{time.monotonic_ns()}",
        "enable.auto.commit": False, "isolation.level": isolation,
        "fetch.max.bytes": 52428800, "max.partition.fetch.bytes": 10485760,
    })  # fmt: skip
    consumer.assign([TopicPartition(topic, 0, 0)])
    got = 0
    started = time.perf_counter()
    deadline = started + TIMEOUT_S
    while got < n:
        if time.perf_counter() > deadline:
            raise RuntimeError(f"{isolation}: {got} of {n} records within {TIMEOUT_S} s")
        for m in consumer.consume(10_000, 1.0):
            if m.error() is None:
                got += 1
            elif m.error().code() != KafkaError._PARTITION_EOF:
                raise RuntimeError(str(m.error()))
    rate = n / (time.perf_counter() - started)
    consumer.close()
    return rate


def _row(
    metric: str, value: float, reference: str, ref_value: float, goal: float
) -> dict[str, Any]:
    ratio = value / ref_value
    return {
        "metric": metric, "value": value, "unit": "records/s", "reference": reference,
        "reference_value": ref_value, "ratio": ratio, "goal": f"≥ {goal}x",
        "met": ratio >= goal,
    }  # fmt: skip


def _table(rows: list[dict[str, Any]]) -> str:
    lines = [
        "| metric | seglog | reference (same run) | ratio | goal |",
        "|---|--:|---|--:|---|",
    ]
    for r in rows:
        mark = " ✓" if r["met"] else " ✗"
        lines.append(
            f"| {r['metric']} | {r['value']:,.0f} records/s | "
            f"{r['reference_value']:,.0f} records/s {r['reference']} | {r['ratio']:.2f}x | "
            f"{r['goal']}{mark} |"
        )
    return "\n".join(lines)


def main() -> None:
    """Start one broker, run both parts ``--repeat`` times, print the medians."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=100_000)
    parser.add_argument("--size", type=int, default=1024, help="record value bytes")
    parser.add_argument("--per-txn", type=int, default=1000, help="records per transaction")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--json", type=Path, help="write the rows, settings and samples here")
    parser.add_argument(
        "--broker-args",
        default="",
        help="extra `seglog serve` flags for both sides, e.g. Kafka's default flush policy "
        "(no fsync before the answer): '--log-flush-interval-messages 9223372036854775807'",
    )
    args = parser.parse_args()
    value = b"x" * args.size
    samples: dict[str, list[float]] = {
        k: [] for k in ("idempotent", "transactional", "read_uncommitted", "read_committed")
    }
    with (
        tempfile.TemporaryDirectory() as work,
        start_broker(Path(work) / "data", extra_args=shlex.split(args.broker_args)) as broker,
    ):
        admin = AdminClient({"bootstrap.servers": broker.bootstrap})
        for i in range(args.repeat):
            idem, txn = f"idem-{i}", f"txn-{i}"
            for future in admin.create_topics([NewTopic(idem, 1), NewTopic(txn, 1)]).values():
                future.result(30)
            # each pair in turn, the first of the pair alternating between repeats, so that
            # the load of a shared machine drifting over a run favours neither side
            order = 1 if i % 2 == 0 else -1
            pair = [("idempotent", idem, 0), ("transactional", txn, args.per_txn)]
            for key, topic, per_txn in pair[::order]:
                samples[key].append(_produce(broker.bootstrap, topic, args.records, value, per_txn))
            for isolation in ("read_uncommitted", "read_committed")[::order]:
                samples[isolation].append(_fetch(broker.bootstrap, txn, args.records, isolation))
            _log(f"repeat {i + 1}: " + ", ".join(f"{k} {v[-1]:,.0f}" for k, v in samples.items()))
    med = {k: statistics.median(v) for k, v in samples.items()}
    kib = args.size / 1024
    rows = [
        _row(
            f"transactional produce, commit every {args.per_txn:,} records of {kib:g} KiB",
            med["transactional"], "idempotent produce", med["idempotent"], 0.8,
        ),
        _row(
            "read_committed fetch (committed transactions)", med["read_committed"],
            "read_uncommitted fetch", med["read_uncommitted"], 0.9,
        ),
    ]  # fmt: skip
    print(_table(rows))
    if args.json is not None:
        doc = {"rows": rows, "settings": vars(args) | {"json": str(args.json)}, "samples": samples}
        args.json.write_text(json.dumps(doc, indent=2))


if __name__ == "__main__":
    main()
