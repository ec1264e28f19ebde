"""One benchmark run: every phase, each seglog figure next to a reference measured in the
same run (interleaved repeat by repeat, so a noisy neighbour hurts both sides alike).

Phases: (1) produce and fetch through a real ``seglog serve`` subprocess (default
durability: fsync before ack, group commit), with the raw disk and client-only references;
(2) embedded publish/consume; (3) Spark batch reads against Parquet and JSON lines;
(4) the storage engine (``_storage_bench.storage_bench``: publish/consume goals, open
after kill -9 and after a clean shutdown, compaction).
"""

from __future__ import annotations

import contextlib
import importlib.metadata
import os
import platform
import shutil
import subprocess
import tempfile
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import confluent_kafka

from seglog.bench._embedded import embedded_publish_consume
from seglog.bench._kafka import Rate
from seglog.bench._report import Report, Row, Samples, measure
from seglog.bench._spark_results import SOURCES, SparkResults
from seglog.bench._wire import wire_phase

__all__ = ["BenchOptions", "machine_info", "run_bench"]

MIB = 1 << 20
Progress = Callable[[str], None]


@dataclass(frozen=True)
class BenchOptions:
    """What to run and how big. ``data_dir`` None: a temporary directory under the current
    directory (same disk as the user's data), removed afterwards."""

    messages: int = 300_000
    """Messages per produce run (1 KiB and 100 B) and per embedded run."""
    spark_rows: int = 1_000_000
    repeat: int = 3
    skip_spark: bool = False
    data_dir: Path | None = None
    skip_storage: bool = False
    storage_size: int = 256 * MIB
    """Bytes of the log the storage section kills and reopens (the issue asks for 1 GiB)."""
    storage_compact: int | None = None
    """Bytes of the log the storage section compacts (None: min(storage_size, 16 MiB))."""

    @classmethod
    def quick(cls, **overrides: Any) -> BenchOptions:
        """Tiny sizes for tests: every row, in well under a minute (Spark start included)."""
        tiny = {"messages": 2000, "spark_rows": 5000, "repeat": 1}
        return cls(**{**tiny, "storage_size": 2 * MIB, "storage_compact": MIB, **overrides})

    @property
    def raw_bytes(self) -> int:
        """Bytes of the raw append reference: the 1 KiB produce volume, within 4 to 512 MiB."""
        return max(4 * MIB, min(512 * MIB, self.messages * 1024))


def _first_line(cmd: list[str]) -> str:
    try:
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=30, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"unavailable ({exc})"
    text = (done.stdout or done.stderr).strip().splitlines()
    return text[0] if text else "unknown"


def machine_info() -> dict[str, str]:
    """nproc, CPU model, Python, Java, confluent-kafka/librdkafka and pyspark versions."""
    cpu = "unknown"
    with contextlib.suppress(OSError), open("/proc/cpuinfo", encoding="utf-8") as f:
        cpu = next((ln.split(":", 1)[1].strip() for ln in f if ln.startswith("model name")), cpu)
    info = {
        "nproc": str(os.cpu_count()),
        "cpu": cpu,
        "python": platform.python_version(),
        "java": _first_line(["java", "-version"]),
        "os": platform.platform(terse=True),
    }
    info["confluent-kafka"] = (
        f"{importlib.metadata.version('confluent-kafka')}"
        f" (librdkafka {confluent_kafka.libversion()[0]})"
    )
    with contextlib.suppress(importlib.metadata.PackageNotFoundError):
        info["pyspark"] = importlib.metadata.version("pyspark")
    return info


def _embedded_rows(opts: BenchOptions, work: Path, progress: Progress) -> list[Row]:
    publish, consume = Samples("msgs/s"), Samples("msgs/s")
    for r in range(opts.repeat):
        holder: list[Rate] = []

        def once(r: int = r, holder: list[Rate] = holder) -> float:
            pub, con = embedded_publish_consume(work / f"embedded-{r}", opts.messages)
            holder.append(con)
            return pub.msgs_per_s

        tag = f"{r + 1}/{opts.repeat}"
        measure(publish, progress, f"embedded publish 100 B x1000 {tag}", once)
        if holder:
            consume.values.append(holder[0].msgs_per_s)
            progress(f"embedded consume {tag}: {consume.values[-1]:,.0f} msgs/s")
        elif publish.error:
            consume.error = publish.error
        shutil.rmtree(work / f"embedded-{r}", ignore_errors=True)
    return [
        Row("embedded publish 100 B, batches of 1000", publish),
        Row("embedded consume 100 B, batches of 1000", consume),
    ]


def _spark_rows(opts: BenchOptions, work: Path, progress: Progress) -> list[Row]:
    try:
        # pyspark is an extra: import it only when Spark is measured
        from seglog.bench._spark import spark_reads  # noqa: PLC0415

        res = spark_reads(work, opts.spark_rows, opts.repeat, progress)
    except Exception as exc:  # no pyspark, no JVM...: report it in the rows
        error = f"{type(exc).__name__}: {str(exc)[:300]}"
        res = SparkResults()
        for source in SOURCES:
            res.fail(source, error)
    return [
        Row("spark count(), topic", res.count["seglog"], "Parquet", res.count["parquet"]),
        Row("spark count(), topic", res.count["seglog"], "JSON lines", res.count["json"]),
        Row(
            "spark groupBy(key), topic", res.group_by["seglog"], "Parquet", res.group_by["parquet"]
        ),
        Row(
            "spark groupBy(key), topic", res.group_by["seglog"], "JSON lines", res.group_by["json"]
        ),
        Row(
            "spark count(), topic",
            res.count["seglog"],
            "no-op Arrow source",
            res.count["ceiling"],
            target=0.8,
        ),
        Row(
            "spark groupBy(key), topic",
            res.group_by["seglog"],
            "no-op Arrow source",
            res.group_by["ceiling"],
            target=0.8,
        ),
        Row(
            "spark count(), read_topic over mirrors",
            res.count["mirrors"],
            "Parquet",
            res.count["parquet"],
            target=0.8,
        ),
        Row(
            "spark streaming sink, path (exactly once)",
            res.sink.path,
            "no-op Arrow sink",
            res.sink.ceiling,
            target=0.8,
        ),
        Row(
            "spark streaming sink, wire (seglog serve)",
            res.sink.wire,
            "no-op Arrow sink",
            res.sink.ceiling,
            target=0.8,
        ),
        Row("spark count(), wire mode", res.sink.read_wire, "path mode", res.sink.read_path),
        Row(
            "spark groupBy(key), read_topic over mirrors",
            res.group_by["mirrors"],
            "Parquet",
            res.group_by["parquet"],
            target=0.8,
        ),
    ]


def _storage_rows(opts: BenchOptions, work: Path, progress: Progress) -> list[Row]:
    """The storage engine's rows (``storage_bench``), as Rows: its goals (absolute,
    "<= 0.1 s", ">= 1 M msg/s") go to ``Row.goal``; a failure becomes one error row."""
    from seglog.bench._storage_bench import storage_bench  # noqa: PLC0415  (its own section)

    try:
        rows = storage_bench(
            work,
            size_bytes=opts.storage_size,
            messages=opts.messages,
            compact_bytes=opts.storage_compact,
            repeat=opts.repeat,
            progress=lambda line: progress(f"storage: {line}"),
        )
    except Exception as exc:  # every failure goes into the table; the run carries on
        failed = Samples("s", error=f"{type(exc).__name__}: {str(exc)[:300]}")
        progress(f"storage: FAILED {failed.error}")
        return [Row("storage benchmark", failed)]
    return [
        Row(
            r.metric,
            Samples(r.unit, list(r.samples)),
            r.reference_name or None,
            Samples(r.unit, list(r.reference_samples)) if r.reference_samples else None,
            goal=r.goal or None,
            goal_met=r.met,
        )
        for r in rows
    ]


def run_bench(opts: BenchOptions, progress: Progress = lambda _msg: None) -> Report:
    """Run every phase with ``opts``; ``progress`` receives one line per phase and per
    measurement. Failures become errors in the report's rows, never exceptions (except
    OSError when the work directory cannot be created)."""
    started = time.perf_counter()
    base = opts.data_dir
    if base is not None:
        base.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix="seglog-bench-", dir=base or Path.cwd()))
    progress(f"work directory {work} (removed at the end)")
    try:
        rows = wire_phase(work, opts.messages, opts.repeat, opts.raw_bytes, progress)
        progress(f"embedded: publish/consume {opts.messages:,} messages of 100 B")
        rows += _embedded_rows(opts, work, progress)
        if not opts.skip_spark:
            rows += _spark_rows(opts, work, progress)
        if not opts.skip_storage:
            progress(f"storage: engine benchmark, {opts.storage_size / MIB:,.0f} MiB log")
            rows += _storage_rows(opts, work, progress)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    options = {k: str(v) for k, v in asdict(opts).items() if v is not None}
    options["raw_bytes"] = str(opts.raw_bytes)
    return Report(rows, machine_info(), options, time.perf_counter() - started)
