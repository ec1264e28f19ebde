"""The wire phase: produce and fetch through a real ``seglog serve`` subprocess, next to the
raw disk and client-only references, interleaved repeat by repeat.

The broker runs with its defaults (acks=all answered after fsync, group commit). Each
repeat produces to fresh single-partition topics (``bench-1024-R``, ``bench-100-R``) created
with CreateTopics; the 1 KiB topic is then read back whole. The broker's CPU time (user +
system, from /proc) during each produce and fetch gives CPU-seconds per GB of values.
"""

from __future__ import annotations

import contextlib
import functools
import os
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from seglog.bench._disk import raw_append_rate
from seglog.bench._kafka import (
    Rate,
    create_topic,
    fetch_confluent,
    fetch_kafka_python,
    produce,
)
from seglog.bench._report import Row, Samples, measure
from seglog.broker import BrokerProcess, start_broker

__all__ = ["wire_phase"]

MOCK = {"test.mock.num.brokers": 1}
SIZES = {1024: "1 KiB", 100: "100 B"}
KAFKA_PYTHON_MESSAGES = 100_000
"""kafka-python reads at most this many messages of the 1 KiB topic per repeat."""
Progress = Callable[[str], None]


@dataclass
class _Flow:
    """One kind of transfer: msgs/s, MB/s and (broker side only) CPU-s per GB."""

    msgs: Samples = field(default_factory=lambda: Samples("msgs/s"))
    mb: Samples = field(default_factory=lambda: Samples("MB/s"))
    cpu: Samples = field(default_factory=lambda: Samples("CPU-s/GB"))

    def fail(self, error: str) -> None:
        self.msgs.error = self.mb.error = self.cpu.error = error


def _cpu_seconds(pid: int) -> float:
    """CPU seconds process ``pid``'s threads have run so far, in nanosecond resolution.

    Sums the first field (time on CPU, ns) of ``/proc/PID/task/TID/schedstat`` over the
    live threads. ``/proc/PID/stat``'s utime + stime count in clock ticks (10 ms), too
    coarse for a short run: a quick benchmark measured 0. The broker's threads (event loop,
    one group-commit thread per partition, retention) live as long as the process, so a
    thread exiting mid-measurement, whose time would drop out of the sum, does not occur.
    """
    total_ns = 0
    task_dir = f"/proc/{pid}/task"
    for tid in os.listdir(task_dir):
        try:
            with open(f"{task_dir}/{tid}/schedstat", encoding="ascii") as f:
                total_ns += int(f.read().split()[0])
        except (FileNotFoundError, ProcessLookupError):
            continue  # the thread exited between listdir and open
    return total_ns / 1e9


def _run_flow(
    flow: _Flow,
    progress: Progress,
    label: str,
    run: Callable[[], Rate],
    broker: BrokerProcess | None = None,
) -> bool:
    """Measure ``run()`` into ``flow`` (msgs/s reported; MB/s and broker CPU alongside)."""
    rates: list[Rate] = []
    cpu: list[float] = []

    def once() -> float:
        before = _cpu_seconds(broker.process.pid) if broker else 0.0
        rates.append(run())
        if broker:
            cpu.append(_cpu_seconds(broker.process.pid) - before)
        return rates[-1].msgs_per_s

    if not measure(flow.msgs, progress, label, once):
        return False
    flow.mb.values.append(rates[-1].mb_per_s)
    if cpu:
        flow.cpu.values.append(cpu[-1] / (rates[-1].value_bytes / 1e9))
    return True


def _produce_via_broker(bootstrap: str, topic: str, size: int, n: int) -> Rate:
    create_topic(bootstrap, topic)
    return produce({"bootstrap.servers": bootstrap}, topic, size, n)


@dataclass
class _Wire:
    raw: Samples = field(default_factory=lambda: Samples("MB/s"))
    client: dict[int, _Flow] = field(default_factory=lambda: {s: _Flow() for s in SIZES})
    seglog: dict[int, _Flow] = field(default_factory=lambda: {s: _Flow() for s in SIZES})
    fetch: _Flow = field(default_factory=_Flow)
    fetch_kafka_python: _Flow = field(default_factory=_Flow)

    def rows(self) -> list[Row]:
        raw = "raw 1 MiB write+fdatasync"
        client = "client only: librdkafka mock cluster"
        produce_1k, produce_100 = self.seglog[1024], self.seglog[100]
        return [
            Row("produce 1 KiB, acks=all, fsync", produce_1k.mb, raw, self.raw, 0.5),
            Row("produce 1 KiB, acks=all, fsync", produce_1k.msgs, client, self.client[1024].msgs),
            Row(
                "produce 100 B, acks=all, fsync",
                produce_100.msgs,
                client,
                self.client[100].msgs,
                0.7,
            ),
            Row("produce 100 B, acks=all, fsync", produce_100.mb, raw, self.raw),
            Row("fetch 1 KiB (confluent-kafka)", self.fetch.mb),
            Row("fetch 1 KiB (confluent-kafka)", self.fetch.msgs),
            Row("fetch 1 KiB (kafka-python)", self.fetch_kafka_python.msgs),
            Row("broker CPU, produce 1 KiB", produce_1k.cpu),
            Row("broker CPU, produce 100 B", produce_100.cpu),
            Row("broker CPU, fetch 1 KiB (confluent-kafka)", self.fetch.cpu),
        ]


def wire_phase(
    work: Path, messages: int, repeat: int, raw_bytes: int, progress: Progress
) -> list[Row]:
    """Start ``seglog serve`` on a free loopback port (data in ``work``), run ``repeat``
    rounds of: raw append of ``raw_bytes``; for 1 KiB then 100 B, client-only produce and
    produce through seglog of ``messages`` messages; fetch of the 1 KiB topic with
    confluent-kafka (whole topic) and kafka-python (first ``KAFKA_PYTHON_MESSAGES``).
    Returns the table rows; failures are row errors."""
    wire = _Wire()
    kp_messages = min(messages, KAFKA_PYTHON_MESSAGES)
    with contextlib.ExitStack() as stack:
        broker: BrokerProcess | None = None
        progress("broker: starting seglog serve (default durability: fsync before ack)")
        try:
            broker = start_broker(work / "broker-data", log_path=work / "broker.log")
            stack.callback(broker.stop)
        except Exception as exc:  # a broken broker is a row error, not a crash
            error = f"seglog serve did not start: {type(exc).__name__}: {exc}"[:400]
            for flow in (*wire.seglog.values(), wire.fetch, wire.fetch_kafka_python):
                flow.fail(error)
            progress(f"broker: FAILED {error}")
        for r in range(repeat):
            tag = f"{r + 1}/{repeat}"
            measure(
                wire.raw,
                progress,
                f"raw 1 MiB write+fdatasync {tag}",
                functools.partial(raw_append_rate, work, raw_bytes),
            )
            for size, name in SIZES.items():
                _run_flow(
                    wire.client[size],
                    progress,
                    f"client-only produce {name} {tag}",
                    functools.partial(produce, MOCK, f"mock-{size}-{r}", size, messages),
                )
                if broker is None:
                    continue
                topic, bootstrap = f"bench-{size}-{r}", broker.bootstrap
                produced = _run_flow(
                    wire.seglog[size],
                    progress,
                    f"seglog produce {name} {tag}",
                    functools.partial(_produce_via_broker, bootstrap, topic, size, messages),
                    broker,
                )
                if size != 1024 or not produced:
                    continue
                for flow, fetch, client, count in (
                    (wire.fetch, fetch_confluent, "confluent-kafka", messages),
                    # kafka-python runs ~5x slower: a prefix of the topic gives its rate
                    (wire.fetch_kafka_python, fetch_kafka_python, "kafka-python", kp_messages),
                ):
                    _run_flow(
                        flow,
                        progress,
                        f"seglog fetch 1 KiB {client} {tag}",
                        functools.partial(fetch, bootstrap, topic, count),
                        broker,
                    )
    return wire.rows()
