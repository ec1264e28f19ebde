"""Time of one ``/metrics`` scrape of a broker with 100 partitions and 20 consumer groups
(issue goal: < 50 ms), next to the time of fetching a tiny static page from the same kind
of server in the same run (prometheus-client's HTTP server with an empty registry: the
floor of any scrape).

    .venv/bin/python benchmarks/metrics_scrape.py            # 100 partitions, 20 groups
    .venv/bin/python benchmarks/metrics_scrape.py --partitions 1000 --groups 50
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
import urllib.request
from pathlib import Path

from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from prometheus_client import CollectorRegistry, start_http_server

from seglog.broker import free_port, start_broker


def _time_get(url: str, repeat: int) -> list[float]:
    times = []
    for _ in range(repeat):
        started = time.perf_counter()
        with urllib.request.urlopen(url, timeout=30) as resp:
            resp.read()
        times.append(time.perf_counter() - started)
    return times


def main() -> None:
    """Set up the broker, scrape it ``--repeat`` times, print medians."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--partitions", type=int, default=100)
    parser.add_argument("--groups", type=int, default=20)
    parser.add_argument("--repeat", type=int, default=50)
    args = parser.parse_args()
    port = free_port()
    with tempfile.TemporaryDirectory() as tmp:
        broker = start_broker(
            Path(tmp) / "data", extra_args=["--metrics-listen", f"127.0.0.1:{port}"]
        )
        try:
            b = broker.bootstrap
            admin = AdminClient({"bootstrap.servers": b})
            topics = [f"t{i}" for i in range(args.partitions // 10)]
            for f in admin.create_topics([NewTopic(t, 10) for t in topics]).values():
                f.result(30)
            producer = Producer({"bootstrap.servers": b, "linger.ms": 5})
            for t in topics:
                for p in range(10):
                    producer.produce(t, value=b"x" * 100, partition=p)
            producer.flush(30)
            for g in range(args.groups):
                c = Consumer({"bootstrap.servers": b, "group.id": f"g{g}"})
                c.commit(
                    offsets=[TopicPartition(t, p, 1) for t in topics for p in range(10)],
                    asynchronous=False,
                )
                c.close()
            url = f"http://127.0.0.1:{port}/metrics"
            _time_get(url, 3)  # warm up
            scrape = _time_get(url, args.repeat)
            with urllib.request.urlopen(url, timeout=30) as resp:
                size = len(resp.read())
        finally:
            broker.stop()
    floor_port = free_port()
    server, _thread = start_http_server(floor_port, "127.0.0.1", registry=CollectorRegistry())
    try:
        floor = _time_get(f"http://127.0.0.1:{floor_port}/metrics", args.repeat)
    finally:
        server.shutdown()
    med, flo = statistics.median(scrape), statistics.median(floor)
    print(f"{args.partitions} partitions, {args.groups} groups: /metrics {size / 1024:.0f} KiB")
    print(
        f"scrape median {med * 1000:.1f} ms (goal < 50 ms);"
        f" empty-registry floor {flo * 1000:.2f} ms"
    )


if __name__ == "__main__":
    main()
