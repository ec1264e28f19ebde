"""What security and durable commits cost, measured in one run against one broker with
PLAINTEXT, SSL and SASL_SSL listeners (certificates from ``trustme``, a SCRAM user):

- produce and fetch MB/s over SSL and SASL_SSL (SCRAM-SHA-512) next to PLAINTEXT
  (confluent-kafka, 1 KiB values, acks=all; goal >= 0.7x);
- SCRAM-SHA-512 handshake: connect + authenticate + one Metadata, median ms, next to the
  same over PLAINTEXT;
- offset commits per second (synchronous OffsetCommit, each fsynced into
  ``__consumer_offsets``) next to synchronous one-record produce requests per second of
  the same client (goal >= 0.8x).

    .venv/bin/python benchmarks/security_bench.py            # 3 repeats, medians
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import trustme
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient

from seglog.broker import free_port, start_broker

SEGLOG = str(Path(sys.executable).with_name("seglog"))


def _produce_rate(conf: dict[str, Any], topic: str, count: int, size: int) -> float:
    producer = Producer({**conf, "acks": "all", "linger.ms": 5})
    value = b"x" * size
    started = time.perf_counter()
    for _ in range(count):
        while True:
            try:
                producer.produce(topic, value)
                break
            except BufferError:
                producer.poll(0.05)
    producer.flush(120)
    return count * size / (time.perf_counter() - started) / 1e6


def _fetch_rate(conf: dict[str, Any], topic: str, count: int, size: int) -> float:
    consumer = Consumer({**conf, "group.id": f"bench-{time.time()}", "fetch.queue.backoff.ms": 0})
    consumer.assign([TopicPartition(topic, 0, 0)])
    got, started = 0, time.perf_counter()
    while got < count:
        got += sum(1 for m in consumer.consume(1000, 1.0) if m.error() is None)
    rate = count * size / (time.perf_counter() - started) / 1e6
    consumer.close()
    return rate


def _handshake_ms(conf: dict[str, Any], repeat: int = 15) -> float:
    times = []
    for _ in range(repeat):
        started = time.perf_counter()
        AdminClient(conf).list_topics(timeout=15)
        times.append((time.perf_counter() - started) * 1000)
    return statistics.median(times)


def _commits_vs_produces(conf: dict[str, Any], topic: str, n: int) -> tuple[float, float]:
    producer = Producer({**conf, "acks": "all", "linger.ms": 0})
    started = time.perf_counter()
    for _ in range(n):
        producer.produce(topic, b"x" * 16)
        producer.flush(10)
    produces = n / (time.perf_counter() - started)
    consumer = Consumer({**conf, "group.id": "bench-commits", "enable.auto.commit": False})
    started = time.perf_counter()
    for i in range(n):
        consumer.commit(offsets=[TopicPartition(topic, 0, i + 1)], asynchronous=False)
    commits = n / (time.perf_counter() - started)
    consumer.close()
    return commits, produces


def main() -> None:
    """Run every measure ``--repeat`` times and print medians and ratios."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=100_000)
    parser.add_argument("--size", type=int, default=1024)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        ca = trustme.CA()
        ca.issue_cert("127.0.0.1").private_key_and_cert_chain_pem.write_to_path(str(work / "s.pem"))
        ca.cert_pem.write_to_path(str(work / "ca.pem"))
        data = work / "data"
        data.mkdir()
        subprocess.run(
            [SEGLOG, "user", "add", "bench", "--data-dir", str(data), "--password", "pw"],
            check=True,
            capture_output=True,
        )
        ports = {p: free_port() for p in ("PLAINTEXT", "SSL", "SASL_SSL")}
        broker = start_broker(
            data,
            port=ports["PLAINTEXT"],
            extra_args=[
                "--listeners",
                ",".join(f"{p}://127.0.0.1:{q}" for p, q in ports.items()),
                "--ssl-certfile",
                str(work / "s.pem"),
            ],
        )
        confs: dict[str, dict[str, Any]] = {
            "PLAINTEXT": {"bootstrap.servers": f"127.0.0.1:{ports['PLAINTEXT']}"},
            "SSL": {
                "bootstrap.servers": f"127.0.0.1:{ports['SSL']}",
                "security.protocol": "SSL",
                "ssl.ca.location": str(work / "ca.pem"),
            },
            "SASL_SSL": {
                "bootstrap.servers": f"127.0.0.1:{ports['SASL_SSL']}",
                "security.protocol": "SASL_SSL",
                "ssl.ca.location": str(work / "ca.pem"),
                "sasl.mechanism": "SCRAM-SHA-512",
                "sasl.username": "bench",
                "sasl.password": "pw",
            },
        }
        results: dict[str, list[float]] = {}
        try:
            for r in range(args.repeat):
                for name, conf in confs.items():
                    topic = f"bench-{name}-{r}"
                    results.setdefault(f"produce {name}", []).append(
                        _produce_rate(conf, topic, args.messages, args.size)
                    )
                    results.setdefault(f"fetch {name}", []).append(
                        _fetch_rate(conf, topic, args.messages, args.size)
                    )
                    results.setdefault(f"connect {name}", []).append(_handshake_ms(conf))
                commits, produces = _commits_vs_produces(confs["PLAINTEXT"], f"bench-c-{r}", 1000)
                results.setdefault("commits/s", []).append(commits)
                results.setdefault("produce requests/s", []).append(produces)
        finally:
            broker.stop()
    med = {k: statistics.median(v) for k, v in results.items()}
    print(f"{args.messages:,} x {args.size} B, medians of {args.repeat}")
    for kind in ("produce", "fetch"):
        base = med[f"{kind} PLAINTEXT"]
        for name in ("PLAINTEXT", "SSL", "SASL_SSL"):
            value = med[f"{kind} {name}"]
            print(f"{kind:8} {name:10} {value:8.1f} MB/s  {value / base:5.2f}x")
    for name in ("PLAINTEXT", "SSL", "SASL_SSL"):
        print(f"connect+auth+metadata {name:10} {med[f'connect {name}']:7.1f} ms")
    ratio = med["commits/s"] / med["produce requests/s"]
    commits, produces = med["commits/s"], med["produce requests/s"]
    print(f"offset commits {commits:.0f}/s vs produce requests {produces:.0f}/s: {ratio:.2f}x")


if __name__ == "__main__":
    main()
