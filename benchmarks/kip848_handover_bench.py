"""A KIP-848 partition hand-over on ``seglog serve``: how long a partition a newcomer is
owed takes to reach it once its owner gave it up, with seglog's short heartbeat interval
for members waiting for unreleased partitions
(``seglog.group.consumer.unreleased.heartbeat.interval.ms``, default 50) against the same
broker with it at 0 (every answer carries ``group.consumer.heartbeat.interval.ms``, as
Kafka's coordinator does), measured in the same run (confluent-kafka / librdkafka).

Each sample is a fresh group on a 2-partition topic: an owner joins and gets both
partitions; a newcomer joins at a random point 10-90 % into the owner's heartbeat
interval (so the two heartbeat out of phase); the time is from the owner's ``on_revoke``
to the newcomer's ``on_assign``. Both clients are polled by one thread every 5 ms. The two
brokers take turns, sample by sample. Prints ``seglog.bench``'s markdown table of medians;
``--json FILE`` writes the report (rows, every sample, settings).

    .venv/bin/python benchmarks/kip848_handover_bench.py                  # 10 groups each
    .venv/bin/python benchmarks/kip848_handover_bench.py --groups 1       # smoke test
"""

from __future__ import annotations

import argparse
import random
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from confluent_kafka import Consumer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from seglog.bench import Report, Row, Samples, machine_info
from seglog.broker import BrokerProcess, start_broker

TOPIC = "handover"
TIMEOUT_S = 30.0
UNRELEASED_NAME = "seglog.group.consumer.unreleased.heartbeat.interval.ms"
UNRELEASED_FLAG = "--" + UNRELEASED_NAME.replace(".", "-")


def _log(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


def _handover(bootstrap: str, group: str, heartbeat_ms: int, rng: random.Random) -> float:
    """One sample: seconds from the owner's ``on_revoke`` to the newcomer's ``on_assign``."""
    events: dict[str, float] = {}

    def member(name: str) -> Consumer:
        c = Consumer(
            {
                "bootstrap.servers": bootstrap,
                "group.id": group,
                "group.protocol": "consumer",
                "auto.offset.reset": "latest",
            }
        )

        def assigned(_c: Any, parts: list[TopicPartition]) -> None:
            if parts:
                events.setdefault(f"{name} assigned", time.perf_counter())

        def revoked(_c: Any, parts: list[TopicPartition]) -> None:
            if parts:
                events.setdefault(f"{name} revoked", time.perf_counter())

        c.subscribe([TOPIC], on_assign=assigned, on_revoke=revoked)
        return c

    members = [member("owner")]

    def pump(done: Callable[[], bool], what: str) -> None:
        deadline = time.perf_counter() + TIMEOUT_S
        while not done():
            for c in members:
                c.consume(10, 0.005)
            if time.perf_counter() > deadline:
                raise TimeoutError(f"{group}: {what} ({events})")

    try:
        pump(lambda: "owner assigned" in events, "the owner never got its partitions")
        # the owner acknowledged its assignment at once: its heartbeats start from there
        start = events["owner assigned"] + rng.uniform(0.1, 0.9) * heartbeat_ms / 1000
        pump(lambda: time.perf_counter() >= start, "")
        members.append(member("newcomer"))
        pump(lambda: "newcomer assigned" in events, "no partition moved")
        if "owner revoked" not in events:
            raise RuntimeError(f"{group}: the newcomer was assigned before any revocation")
        return events["newcomer assigned"] - events["owner revoked"]
    finally:
        for c in members:
            c.close()


def _start(tmp: Path, name: str, heartbeat_ms: int, unreleased_ms: int) -> BrokerProcess:
    broker = start_broker(
        tmp / name,
        extra_args=[
            "--group-consumer-heartbeat-interval-ms", str(heartbeat_ms),
            UNRELEASED_FLAG, str(unreleased_ms),
        ],
    )  # fmt: skip
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.create_topics([NewTopic(TOPIC, 2)])[TOPIC].result(30)
    return broker


def main() -> None:
    """Start both brokers, take ``--groups`` samples on each in turn, print the medians."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--groups", type=int, default=10, help="samples per broker")
    parser.add_argument("--heartbeat-ms", type=int, default=500)
    parser.add_argument("--unreleased-ms", type=int, default=50)
    parser.add_argument("--seed", type=int, default=848)
    parser.add_argument("--json", type=Path, help="write the report (rows, samples, settings)")
    args = parser.parse_args()
    rng = random.Random(args.seed)
    samples: dict[str, list[float]] = {"short": [], "configured": []}
    started = time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp:
        brokers = {
            "short": _start(Path(tmp), "short", args.heartbeat_ms, args.unreleased_ms),
            "configured": _start(Path(tmp), "configured", args.heartbeat_ms, 0),
        }
        try:
            for i in range(args.groups):
                for name, broker in brokers.items():
                    took = _handover(broker.bootstrap, f"g{i}", args.heartbeat_ms, rng)
                    samples[name].append(took)
                    _log(f"group {i + 1} {name}: {took * 1000:.1f} ms")
        finally:
            for broker in brokers.values():
                broker.stop()
    row = Row(
        f"KIP-848 hand-over, owner's on_revoke to newcomer's on_assign "
        f"(heartbeat {args.heartbeat_ms} ms, waiting members {args.unreleased_ms} ms)",
        Samples("s", samples["short"]),
        f"{UNRELEASED_NAME}=0, Kafka's behaviour",
        Samples("s", samples["configured"]),
    )
    settings = {
        "groups": args.groups,
        "heartbeat_interval_ms": args.heartbeat_ms,
        "unreleased_heartbeat_interval_ms": args.unreleased_ms,
        "seed": args.seed,
    }
    report = Report([row], machine_info(), settings, time.perf_counter() - started)
    print(
        f"{args.groups} groups per broker, medians; the slowest hand-over "
        f"{max(samples['short']) * 1000:.0f} ms against {max(samples['configured']) * 1000:.0f}"
        f" ms ({report.duration_s:.1f} s)"
    )
    print(report.markdown())
    if args.json:
        report.write_json(args.json)


if __name__ == "__main__":
    main()
