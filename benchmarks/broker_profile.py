"""Broker produce profile: CPU-seconds per GB and msgs/s of ``seglog serve`` taking
confluent-kafka produces (acks=all, default durability: fsync before ack, group commit),
next to the two references measured in the same run, interleaved repeat by repeat:

- raw: ``os.write`` + ``os.fdatasync`` of 1 MiB appends in the same data directory
  (``seglog.bench._disk.raw_append_rate``), the ceiling for a log that fsyncs every ack;
- client-only: the same confluent-kafka producer loop against librdkafka's in-process mock
  cluster (``seglog.bench._kafka.produce`` with ``test.mock.num.brokers``), the rate the
  client reaches with no broker bottleneck.

Broker CPU is read from ``/proc/<pid>/task/*/stat`` (user + system) before and after each
produce, split into the event-loop thread and the others (storage's fsync threads).
Wall-clock rates on a shared 2-core machine are noisy: quote the ratios and CPU-s per GB.

    .venv/bin/python benchmarks/broker_profile.py                 # 3 repeats
    .venv/bin/python benchmarks/broker_profile.py --profile prof  # + cProfile of the loop
    .venv/bin/python benchmarks/broker_profile.py --raw           # fixed-size raw requests
    .venv/bin/python benchmarks/broker_profile.py --compare-with /tmp/old  # A/B, same run

With ``--profile DIR`` the broker runs under cProfile timed by ``time.thread_time`` (CPU
time of the event-loop thread only; cProfile inflates call-heavy code, so CPU numbers of
that run are not comparable) and the top functions by own time are printed; the raw stats
stay in DIR for ``pstats``.
"""

from __future__ import annotations

import argparse
import os
import pstats
import shutil
import signal
import socket
import statistics
import struct
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from kafka.protocol.producer import ProduceRequest, ProduceResponse
from kafka.record.memory_records import MemoryRecordsBuilder

from seglog.bench import Rate, create_topic, fetch_confluent, produce, raw_append_rate
from seglog.broker import BrokerProcess, free_port, start_broker

SIZES = (1024, 100)
MOCK = {"test.mock.num.brokers": 1}
TICK = os.sysconf("SC_CLK_TCK")


def thread_cpu(pid: int) -> dict[str, float]:
    """CPU seconds (user + system) per thread name of process ``pid``."""
    out: dict[str, float] = {}
    for task in os.listdir(f"/proc/{pid}/task"):
        try:
            with open(f"/proc/{pid}/task/{task}/stat", encoding="ascii") as f:
                text = f.read()
        except FileNotFoundError:  # thread ended
            continue
        name = text[text.index("(") + 1 : text.rindex(")")]
        fields = text.rsplit(")", 1)[1].split()
        key = "loop" if task == str(pid) else name
        out[key] = out.get(key, 0.0) + (int(fields[11]) + int(fields[12])) / TICK
    return out


def cpu_delta(before: dict[str, float], after: dict[str, float]) -> tuple[float, float]:
    """(loop-thread seconds, other-thread seconds) between two ``thread_cpu`` readings.
    Threads that ended in between are lost (storage's fsync threads live as long as a log)."""
    loop = after.get("loop", 0.0) - before.get("loop", 0.0)
    other = sum(v - before.get(k, 0.0) for k, v in after.items() if k != "loop")
    return loop, other


def start_profiled(data: Path, prof: Path, log_path: Path) -> BrokerProcess:
    """``seglog serve`` under cProfile (stats written to ``prof`` on SIGTERM)."""
    port = free_port()
    # thread_time: the loop thread's CPU time, not wall time (the machine is shared)
    code = (
        "import cProfile, contextlib, sys, time\n"
        "from seglog.cli import main\n"
        f"sys.argv = ['seglog', 'serve', '--data-dir', {str(data)!r},"
        f" '--listen', '127.0.0.1:{port}', '--log-level', 'WARNING']\n"
        "prof = cProfile.Profile(time.thread_time)\n"
        "try:\n"
        "    with contextlib.suppress(SystemExit):\n"
        "        prof.runcall(main)\n"
        "finally:\n"
        f"    prof.dump_stats({str(prof)!r})\n"
    )
    with log_path.open("ab") as log_file:
        proc = subprocess.Popen(
            [sys.executable, "-c", code], stdout=log_file, stderr=subprocess.STDOUT
        )
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), 0.2).close()
            break
        except OSError:
            time.sleep(0.1)
    else:
        proc.kill()
        raise RuntimeError(log_path.read_text())
    return BrokerProcess(proc, port, log_path, data)


def produce_frames(topic: str, value_size: int, batch_bytes: int, version: int = 10) -> bytes:
    """One framed Produce request (acks=all) carrying one record batch of about
    ``batch_bytes`` of ``value_size``-byte values, built with kafka-python."""
    builder = MemoryRecordsBuilder(magic=2, compression_type=0, batch_size=batch_bytes * 2)
    value = os.urandom(value_size)
    # ~20 bytes of record framing per value keeps the batch under batch_bytes, which must
    # stay under the broker's message.max.bytes (1,048,588) or every request fails
    for _ in range(max(1, batch_bytes // (value_size + 20))):
        builder.append(timestamp=int(time.time() * 1000), key=None, value=value, headers=[])
    builder.close()
    req = ProduceRequest[version]
    data = req.TopicProduceData(
        name=topic,
        partition_data=[
            req.TopicProduceData.PartitionProduceData(index=0, records=bytes(builder.buffer()))
        ],
    )
    request = req(transactional_id=None, acks=-1, timeout_ms=30_000, topic_data=[data])
    request.with_header(correlation_id=1, client_id="broker-profile")
    return bytes(request.encode(header=True, framed=True))


def raw_client(
    bootstrap: str, frame: bytes, count: int, in_flight: int = 5, version: int = 10
) -> float:
    """Send ``frame`` (a Produce request of ``version``, flexible) ``count`` times over one
    socket, ``in_flight`` requests at most outstanding (librdkafka's default), reading
    every response (RuntimeError unless each has error code 0); returns seconds."""
    host, port = bootstrap.rsplit(":", 1)
    with socket.create_connection((host, int(port))) as sock:
        reader = sock.makefile("rb")
        sent = received = 0
        start = time.perf_counter()
        while received < count:
            while sent < count and sent - received < in_flight:
                sock.sendall(frame)
                sent += 1
            size = struct.unpack(">i", reader.read(4))[0]
            response = reader.read(size)
            if len(response) != size:
                raise RuntimeError("broker closed the connection")
            received += 1
            decoded = ProduceResponse.decode(response[5:], version=version)  # header v1
            code = decoded.responses[0].partition_responses[0].error_code
            if code != 0:
                raise RuntimeError(f"produce failed with error code {code}")
        elapsed = time.perf_counter() - start
        reader.close()
    return elapsed


def run_raw(args: argparse.Namespace) -> None:
    """Fixed-size Produce requests from a raw socket: broker CPU per request and per GB
    (the client costs next to nothing, and request sizes do not depend on timing)."""
    work = Path(tempfile.mkdtemp(prefix="broker-profile-", dir=args.dir))
    cases = [(1024, 1 << 20, args.raw_requests), (100, 1 << 20, args.raw_requests)]
    cases.append((100, 16 << 10, args.raw_requests * 8))
    labels = ["this tree"] + ([f"PYTHONPATH={args.compare_with}"] if args.compare_with else [])
    prof = Path(args.profile) / "broker-raw.prof" if args.profile else None
    brokers: dict[str, BrokerProcess] = {}
    results: dict[tuple[str, int], list[tuple[float, float, float]]] = {}
    try:
        if prof is not None:
            prof.parent.mkdir(parents=True, exist_ok=True)
            brokers[labels[0]] = start_profiled(work / "data", prof, work / "broker.log")
        else:
            brokers[labels[0]] = start_broker(work / "data", log_path=work / "broker.log")
        if args.compare_with:
            brokers[labels[1]] = start_with_source(
                work / "data-compare", work / "broker-compare.log", args.compare_with
            )
        try:
            for r in range(args.repeat):
                raw = raw_append_rate(work, args.raw_mb << 20)
                print(f"[{r + 1}] raw 1 MiB write+fdatasync {raw:8.1f} MB/s", flush=True)
                for case, (value_size, batch_bytes, count) in enumerate(cases):
                    for label in labels if r % 2 == 0 else labels[::-1]:
                        broker = brokers[label]
                        topic = f"raw-{value_size}-{batch_bytes}-{r}"
                        create_topic(broker.bootstrap, topic)
                        frame = produce_frames(topic, value_size, batch_bytes)
                        before = thread_cpu(broker.process.pid)
                        seconds = raw_client(broker.bootstrap, frame, count)
                        loop_s, other_s = cpu_delta(before, thread_cpu(broker.process.pid))
                        gb = len(frame) * count / 1e9
                        mbs = len(frame) * count / seconds / 1e6
                        results.setdefault((label, case), []).append(
                            ((loop_s + other_s) / gb, (loop_s + other_s) / count, mbs / raw)
                        )
                        print(
                            f"[{r + 1}] {label[:24]:24s} {count:5d} x "
                            f"{len(frame) / 1024:6.0f} KiB ({value_size} B values): "
                            f"{mbs:7.1f} MB/s ({mbs / raw:.2f}x raw), broker CPU "
                            f"{(loop_s + other_s) / gb:5.2f} s/GB, "
                            f"{(loop_s + other_s) / count * 1e6:5.0f} us/request "
                            f"(loop {loop_s / count * 1e6:.0f}, other threads "
                            f"{other_s / count * 1e6:.0f})",
                            flush=True,
                        )
        finally:
            for broker in brokers.values():
                broker.stop(signal.SIGTERM, timeout=120)
        print("\nmedians:")
        for (label, case), rows in results.items():
            value_size, batch_bytes, _count = cases[case]
            print(
                f"  {label[:24]:24s} {batch_bytes >> 10:5d} KiB requests of {value_size:4d} B "
                f"values: {statistics.median(r[0] for r in rows):5.2f} CPU-s/GB, "
                f"{statistics.median(r[1] for r in rows) * 1e6:5.0f} us/request, "
                f"{statistics.median(r[2] for r in rows):.2f}x raw"
            )
        if prof is not None:
            stats = pstats.Stats(str(prof))
            stats.sort_stats("tottime").print_stats(args.top)
    finally:
        shutil.rmtree(work, ignore_errors=True)


def start_with_source(data: Path, log_path: Path, source: str | None) -> BrokerProcess:
    """``seglog serve`` from this tree, or with ``PYTHONPATH=source`` (another copy of the
    ``seglog`` package, e.g. the broker before a change) when given."""
    if source is None:
        return start_broker(data, log_path=log_path)
    saved = os.environ.get("PYTHONPATH")
    os.environ["PYTHONPATH"] = source
    try:
        return start_broker(data, log_path=log_path)
    finally:
        if saved is None:
            del os.environ["PYTHONPATH"]
        else:
            os.environ["PYTHONPATH"] = saved


def run(args: argparse.Namespace) -> None:
    work = Path(tempfile.mkdtemp(prefix="broker-profile-", dir=args.dir))
    counts = {1024: args.messages_1k, 100: args.messages_100}
    raw: list[float] = []
    client: dict[int, list[float]] = {s: [] for s in SIZES}
    labels = ["this tree"] + ([f"PYTHONPATH={args.compare_with}"] if args.compare_with else [])
    seglog: dict[tuple[str, int], list[Rate]] = {(b, s): [] for b in labels for s in SIZES}
    cpu: dict[tuple[str, int], list[tuple[float, float]]] = {k: [] for k in seglog}
    fetched: dict[str, list[tuple[Rate, float]]] = {b: [] for b in labels}
    prof = Path(args.profile) / "broker.prof" if args.profile else None
    brokers: dict[str, BrokerProcess] = {}
    try:
        if prof is not None:
            prof.parent.mkdir(parents=True, exist_ok=True)
            brokers[labels[0]] = start_profiled(work / "data", prof, work / "broker.log")
        else:
            brokers[labels[0]] = start_broker(work / "data", log_path=work / "broker.log")
        if args.compare_with:
            brokers[labels[1]] = start_with_source(
                work / "data-compare", work / "broker-compare.log", args.compare_with
            )
        try:
            for r in range(args.repeat):
                raw.append(raw_append_rate(work, args.raw_mb << 20))
                print(f"[{r + 1}] raw 1 MiB write+fdatasync {raw[-1]:8.1f} MB/s", flush=True)
                for size in SIZES:
                    n = counts[size]
                    if not args.skip_client:
                        rate = produce(MOCK, f"mock-{size}-{r}", size, n)
                        client[size].append(rate.msgs_per_s)
                        print(
                            f"[{r + 1}] client-only {size:5d} B {rate.msgs_per_s:10.0f} msgs/s",
                            flush=True,
                        )
                    order = labels if r % 2 == 0 else labels[::-1]
                    for label in order:
                        broker = brokers[label]
                        topic = f"bench-{size}-{r}"
                        create_topic(broker.bootstrap, topic)
                        before = thread_cpu(broker.process.pid)
                        rate = produce({"bootstrap.servers": broker.bootstrap}, topic, size, n)
                        loop_s, other_s = cpu_delta(before, thread_cpu(broker.process.pid))
                        seglog[(label, size)].append(rate)
                        cpu[(label, size)].append((loop_s, other_s))
                        gb = rate.value_bytes / 1e9
                        print(
                            f"[{r + 1}] {label[:24]:24s} {size:5d} B {rate.msgs_per_s:9.0f} "
                            f"msgs/s {rate.mb_per_s:6.1f} MB/s CPU "
                            f"{(loop_s + other_s) / gb:5.2f} s/GB (loop {loop_s / gb:.2f}, "
                            f"other threads {other_s / gb:.2f})",
                            flush=True,
                        )
                        if size != 1024 or args.skip_fetch:
                            continue
                        before = thread_cpu(broker.process.pid)
                        rate = fetch_confluent(broker.bootstrap, topic, n)
                        loop_s, other_s = cpu_delta(before, thread_cpu(broker.process.pid))
                        fetched[label].append((rate, loop_s + other_s))
                        gb = rate.value_bytes / 1e9
                        print(
                            f"[{r + 1}] {label[:24]:24s} fetch 1 KiB {rate.msgs_per_s:9.0f} "
                            f"msgs/s {rate.mb_per_s:6.1f} MB/s CPU "
                            f"{(loop_s + other_s) / gb:5.2f} s/GB",
                            flush=True,
                        )
        finally:
            for broker in brokers.values():
                if broker.stop(signal.SIGTERM, timeout=120) != 0:
                    print(broker.log_text(), file=sys.stderr)
        for label in labels:
            print(f"\n== {label}")
            report(
                raw,
                client,
                {s: seglog[(label, s)] for s in SIZES},
                {s: cpu[(label, s)] for s in SIZES},
            )
        if prof is not None:
            stats = pstats.Stats(str(prof))
            stats.sort_stats("tottime").print_stats(args.top)
            stats.sort_stats("cumulative").print_stats(args.top)
    finally:
        shutil.rmtree(work, ignore_errors=True)


def report(
    raw: list[float],
    client: dict[int, list[float]],
    seglog: dict[int, list[Rate]],
    cpu: dict[int, list[tuple[float, float]]],
) -> None:
    """Medians, and each repeat's ratios against the references of the same repeat."""
    print("\nmedian over repeats (ratios are per repeat, then the median):")
    print(f"  raw 1 MiB write+fdatasync: {statistics.median(raw):.1f} MB/s")
    for size in SIZES:
        rates = seglog[size]
        msgs = statistics.median(r.msgs_per_s for r in rates)
        mbs = statistics.median(r.mb_per_s for r in rates)
        per_gb = statistics.median(
            (lo + oth) / (r.value_bytes / 1e9)
            for r, (lo, oth) in zip(rates, cpu[size], strict=True)
        )
        loop_gb = statistics.median(
            lo / (r.value_bytes / 1e9) for r, (lo, _o) in zip(rates, cpu[size], strict=True)
        )
        vs_raw = statistics.median(r.mb_per_s / w for r, w in zip(rates, raw, strict=True))
        line = (
            f"  seglog {size:5d} B: {msgs:10.0f} msgs/s {mbs:7.1f} MB/s, broker CPU "
            f"{per_gb:.2f} s/GB (loop thread {loop_gb:.2f}); vs raw {vs_raw:.2f}x"
        )
        if client[size]:
            c = statistics.median(client[size])
            ratio = statistics.median(
                r.msgs_per_s / c_ for r, c_ in zip(rates, client[size], strict=True)
            )
            line += f", client-only {c:.0f} msgs/s, vs client-only {ratio:.2f}x"
        print(line)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--messages-1k", type=int, default=200_000, help="1 KiB messages")
    parser.add_argument("--messages-100", type=int, default=1_000_000, help="100 B messages")
    parser.add_argument("--raw-mb", type=int, default=200, help="MiB for the raw reference")
    parser.add_argument("--dir", default=None, help="parent of the work directory")
    parser.add_argument("--profile", default=None, help="run the broker under cProfile")
    parser.add_argument("--top", type=int, default=30, help="functions printed per profile")
    parser.add_argument("--skip-client", action="store_true", help="no client-only runs")
    parser.add_argument("--skip-fetch", action="store_true", help="no fetch runs")
    parser.add_argument(
        "--compare-with",
        default=None,
        help="also run a broker from this PYTHONPATH (a copy of the seglog package)",
    )
    parser.add_argument(
        "--raw", action="store_true", help="fixed-size requests from a raw socket instead"
    )
    parser.add_argument("--raw-requests", type=int, default=300, help="1 MiB requests per case")
    args = parser.parse_args()
    if args.raw:
        run_raw(args)
    else:
        run(args)


if __name__ == "__main__":
    main()
