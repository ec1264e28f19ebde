"""Resident memory (VmRSS) of a ``seglog serve`` broker holding 100 partitions and up to
10 GiB of log, with 50 connected clients (issue 7 goal: <= 150 MiB, flat in log size).

The log is written offline with the storage API (``DataDir`` + ``Log.append`` of record
batches v2, 16 KiB batches of 1 KiB records by default, spread over the partitions, each
batch with its own timestamp so both indexes grow as under real producers), then the broker
is started on it. At each checkpoint (``--checkpoints``, GiB) the broker is stopped, the log
grown offline, the broker restarted, and its RSS read from ``/proc/PID/status``:

- after start (the broker idle on that log);
- after 50 clients connected (25 consumers + 25 producers, confluent-kafka, each having
  fetched Metadata);
- during the traffic (peak, sampled every 50 ms): each consumer is assigned 4 partitions
  from their earliest offsets and fetches ``--fetch-mib``, each producer sends
  ``--produce-mib`` of 1 KiB records (acks=all);
- after the traffic, the 50 clients still connected.

Each RSS figure is the median of ``--samples`` reads 100 ms apart (the peak is a maximum).
The reference, in the same run: an idle broker on an empty data directory. The data is
deleted at the end.

    .venv/bin/python benchmarks/rss_bench.py                      # 1, 5, 10 GiB
    .venv/bin/python benchmarks/rss_bench.py --gib 2 --checkpoints 1,2
    .venv/bin/python benchmarks/rss_bench.py --segment-mib 16     # many segments
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import struct
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import crc32c
import numpy as np
from confluent_kafka import OFFSET_BEGINNING, Consumer, Producer, TopicPartition

from seglog.broker import BrokerProcess, start_broker
from seglog.storage import DataDir, LogConfig, encode_records

TOPIC = "rss"
GIB = 1 << 30
MIB = 1 << 20
_TS = struct.Struct(">qq")  # baseTimestamp @27, maxTimestamp @35
_CRC = struct.Struct(">I")  # crc @17, over [21, end)


def rss_kib(pid: int) -> dict[str, int]:
    """VmRSS, RssAnon, RssFile (KiB) of process ``pid`` from ``/proc/PID/status``."""
    out = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        key, _, rest = line.partition(":")
        if key in {"VmRSS", "RssAnon", "RssFile", "VmHWM"}:
            out[key] = int(rest.split()[0])
    return out


def sample_rss(pid: int, samples: int) -> dict[str, float]:
    """Medians (MiB) of ``samples`` reads 100 ms apart."""
    reads = []
    for i in range(samples):
        if i:
            time.sleep(0.1)
        reads.append(rss_kib(pid))
    return {k: statistics.median(r[k] for r in reads) / 1024 for k in reads[0]}


class PeakSampler:
    """Largest VmRSS of ``pid`` seen every 50 ms while running (a thread)."""

    def __init__(self, pid: int) -> None:
        self.pid = pid
        self.peak_kib = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.wait(0.05):
            self.peak_kib = max(self.peak_kib, rss_kib(self.pid)["VmRSS"])

    def __enter__(self) -> PeakSampler:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()


class Filler:
    """Grows the topic's partitions offline, round robin, in appends of 64 batches."""

    def __init__(self, data: Path, partitions: int, record: int, batch: int, seg: int) -> None:
        self.data = data
        self.partitions = partitions
        self.written = 0
        self._next_partition = 0
        self._ts = 0  # batch timestamps: 1 ms apart, ending about now (see grow_to)
        per = max(1, batch // (record + 8))
        template = encode_records(
            [b"v" * record] * per, None, np.zeros(per, dtype=np.int64), None, 1 << 30
        )
        self.batch_len = len(template)
        self._chunk = bytearray(template * 64)  # 64 batches per append call
        relaxed = LogConfig(flush_ms=1 << 30)  # no fsync per append while filling
        with DataDir(data, default_config=relaxed) as dd:
            configs = {} if seg == 0 else {"segment.bytes": str(seg)}
            dd.create_topic(TOPIC, partitions, configs)

    def _stamp(self) -> None:
        buf, n = self._chunk, self.batch_len
        for pos in range(0, len(buf), n):
            self._ts += 1
            _TS.pack_into(buf, pos + 27, self._ts, self._ts)
            _CRC.pack_into(buf, pos + 17, crc32c.crc32c(memoryview(buf)[pos + 21 : pos + n]))

    def grow_to(self, target: int) -> float:
        """Append until ``target`` bytes of batches are written in all; seconds taken."""
        started = time.perf_counter()
        # timestamps keep growing across calls and end near now, after those of the
        # records the benchmark's producers sent: every index entry has its time entry
        batches = (target - self.written) // self.batch_len + 1
        self._ts = max(self._ts, int(time.time() * 1000) - batches)
        relaxed = LogConfig(flush_ms=1 << 30)
        with DataDir(self.data, default_config=relaxed) as dd:
            logs = [dd.log(TOPIC, p) for p in range(self.partitions)]
            while self.written < target:
                self._stamp()
                logs[self._next_partition].append(self._chunk)
                self._next_partition = (self._next_partition + 1) % self.partitions
                self.written += len(self._chunk)
            for log in logs:
                log.sync()
        return time.perf_counter() - started


def index_bytes(data: Path) -> int:
    """Bytes of the offset and time index files under ``data`` (the broker keeps only a
    summary of them in memory plus a bounded block cache, see storage/index/offset_time.py;
    before issue 7 it held every entry)."""
    return sum(f.stat().st_size for pat in ("*/*.index", "*/*.timeindex") for f in data.glob(pat))


def _connect_clients(bootstrap: str, consumers: int, producers: int) -> tuple[list[Any], list[Any]]:
    base = {"bootstrap.servers": bootstrap}
    cons = [
        Consumer(
            {
                **base,
                "group.id": f"rss-{i}",
                "enable.auto.commit": False,
                "queued.max.messages.kbytes": 8192,  # bounds the client side, not the broker
            }
        )
        for i in range(consumers)
    ]
    prods = [Producer({**base, "acks": "all", "linger.ms": 5}) for _ in range(producers)]
    for c in [*cons, *prods]:
        c.list_topics(TOPIC, timeout=30)
    return cons, prods


def _traffic(cons: list[Any], prods: list[Any], partitions: int, args: argparse.Namespace) -> None:
    """Consumers fetch ``fetch_mib`` each from the earliest offsets of their partitions
    while producers send ``produce_mib`` each; one thread drives them all."""
    for i, c in enumerate(cons):
        mine = [p for p in range(partitions) if p % len(cons) == i]
        c.assign([TopicPartition(TOPIC, p, OFFSET_BEGINNING) for p in mine])
    want = int(args.fetch_mib * MIB)
    got = [0] * len(cons)
    value = b"p" * 1024
    per_producer = int(args.produce_mib * MIB) // len(value)
    sent = 0
    deadline = time.monotonic() + 600
    while (min(got) < want or sent < per_producer) and time.monotonic() < deadline:
        if sent < per_producer:
            for j, p in enumerate(prods):
                for k in range(100):
                    part = (j * 100 + k + sent) % partitions
                    try:
                        p.produce(TOPIC, value, partition=part)
                    except BufferError:
                        p.flush(30)
                        p.produce(TOPIC, value, partition=part)
                p.poll(0)
            sent += 100
        for i, c in enumerate(cons):
            if got[i] < want:
                for m in c.consume(1000, 0.01):
                    if m.error() is None:
                        got[i] += len(m.value() or b"")
    for p in prods:
        p.flush(60)
    if min(got) < want:
        raise RuntimeError(f"consumers got {min(got)} < {want} bytes within 600 s")


def measure(broker: BrokerProcess, partitions: int, args: argparse.Namespace) -> dict[str, Any]:
    """The RSS figures (MiB) of one running broker."""
    pid = broker.process.pid
    time.sleep(args.settle)
    out: dict[str, Any] = {"start": sample_rss(pid, args.samples)}
    n_cons = args.clients // 2
    cons, prods = _connect_clients(broker.bootstrap, n_cons, args.clients - n_cons)
    try:
        time.sleep(args.settle)
        out["connected"] = sample_rss(pid, args.samples)
        with PeakSampler(pid) as peak:
            started = time.perf_counter()
            _traffic(cons, prods, partitions, args)
            out["traffic_s"] = time.perf_counter() - started
        out["peak"] = peak.peak_kib / 1024
        time.sleep(args.settle)
        out["after"] = sample_rss(pid, args.samples)
    finally:
        for c in cons:
            c.close()
        del prods
    return out


def _run_broker(data: Path, partitions: int, args: argparse.Namespace) -> dict[str, Any]:
    started = time.perf_counter()
    # the broker's log next to the data: removed with it at the end
    broker = start_broker(data, timeout=600, log_path=data.parent / f"{data.name}-broker.log")
    up = time.perf_counter() - started
    try:
        res = measure(broker, partitions, args) if partitions else None
        if res is None:
            time.sleep(args.settle)
            res = {"start": sample_rss(broker.process.pid, args.samples)}
        res["up_s"] = up
        res["hwm"] = rss_kib(broker.process.pid)["VmHWM"] / 1024
    finally:
        broker.stop(timeout=120)
    return res


def main() -> None:
    """Idle reference, then fill/restart/measure at each checkpoint; print the table."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--gib", type=float, default=10.0, help="final log size")
    parser.add_argument("--checkpoints", default="1,5,10", help="GiB sizes measured (<= --gib)")
    parser.add_argument("--partitions", type=int, default=100)
    parser.add_argument("--clients", type=int, default=50, help="half consumers, half producers")
    parser.add_argument("--record-bytes", type=int, default=1024)
    parser.add_argument("--batch-kib", type=int, default=16, help="record batch size on disk")
    parser.add_argument("--segment-mib", type=int, default=0, help="0: the broker's default")
    parser.add_argument("--fetch-mib", type=float, default=8.0, help="per consumer")
    parser.add_argument("--produce-mib", type=float, default=2.0, help="per producer")
    parser.add_argument("--samples", type=int, default=5)
    parser.add_argument("--settle", type=float, default=2.0, help="seconds before sampling")
    parser.add_argument("--dir", default=None, help="parent of the temporary data directory")
    args = parser.parse_args()
    points = sorted({float(x) for x in args.checkpoints.split(",") if float(x) < args.gib})
    points.append(args.gib)
    tmp = Path(tempfile.mkdtemp(prefix="seglog-rss-", dir=args.dir))
    rows: list[tuple[float, float, dict[str, Any]]] = []
    try:
        free = shutil.disk_usage(tmp).free
        if free < args.gib * GIB * 1.3:
            raise SystemExit(f"{tmp}: {free / GIB:.1f} GiB free, need {args.gib * 1.3:.1f}")
        idle = _run_broker(tmp / "empty", 0, args)
        data = tmp / "data"
        filler = Filler(
            data, args.partitions, args.record_bytes, args.batch_kib * 1024, args.segment_mib * MIB
        )
        for gib in points:
            fill_s = filler.grow_to(int(gib * GIB))
            res = _run_broker(data, args.partitions, args)
            res["index_mib"] = index_bytes(data) / MIB
            rows.append((filler.written / GIB, fill_s, res))
            print(
                f"{filler.written / GIB:5.2f} GiB: filled in {fill_s:.0f} s, "
                f"broker up in {res['up_s']:.1f} s, RSS start {res['start']['VmRSS']:.1f} / "
                f"connected {res['connected']['VmRSS']:.1f} / after {res['after']['VmRSS']:.1f}"
                f" MiB, peak {res['peak']:.1f}",
                flush=True,
            )
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    print()
    print(
        f"{args.partitions} partitions, {args.batch_kib} KiB batches of {args.record_bytes} B "
        f"records, segment.bytes {args.segment_mib or 1024} MiB; {args.clients} clients; "
        f"RSS in MiB, medians of {args.samples} reads (anon in brackets)"
    )
    head = ("log", "up s", "idle", "50 clients", "traffic peak", "after traffic", "VmHWM")
    print(f"{head[0]:>10} {head[1]:>6} " + " ".join(f"{h:>14}" for h in head[2:]) + " indexes")
    s = idle["start"]
    blank = f"{'':>14}"
    print(
        f"{'empty':>10} {idle['up_s']:6.1f} {s['VmRSS']:7.1f} ({s['RssAnon']:4.0f})"
        f" {blank} {blank} {blank} {idle['hwm']:14.1f}"
    )
    for size, _fill, res in rows:
        cells = [
            f"{res[k]['VmRSS']:7.1f} ({res[k]['RssAnon']:4.0f})" for k in ("start", "connected")
        ]
        a = res["after"]
        print(
            f"{size:6.2f} GiB {res['up_s']:6.1f} {cells[0]} {cells[1]} {res['peak']:14.1f}"
            f" {a['VmRSS']:7.1f} ({a['RssAnon']:4.0f}) {res['hwm']:14.1f} {res['index_mib']:7.1f}"
        )
    if len(rows) > 1:
        (s0, _, r0), (s1, _, r1) = rows[0], rows[-1]
        per = {k: (r1[k]["VmRSS"] - r0[k]["VmRSS"]) / (s1 - s0) for k in ("start", "after")}
        idx = (r1["index_mib"] - r0["index_mib"]) / (s1 - s0)
        print(
            f"growth {s0:.3g} -> {s1:.3g} GiB: {per['start']:+.2f} MiB/GiB idle, "
            f"{per['after']:+.2f} MiB/GiB after traffic; index entries {idx:+.2f} MiB/GiB"
        )


if __name__ == "__main__":
    main()
