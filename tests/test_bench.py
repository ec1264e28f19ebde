"""`seglog bench --quick`: one tiny real run (broker subprocess, clients, SparkSession) that
must fill every row of the table with numbers. Speed itself is never asserted here."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

import pytest

from seglog.bench import Report, Row, Samples

SEGLOG = Path(sys.executable).with_name("seglog")

RAW = "raw 1 MiB write+fdatasync"
CLIENT = "client only: librdkafka mock cluster"
# (metric, unit, reference name, target): the table every run must print
EXPECTED_ROWS = [
    ("produce 1 KiB, acks=all, fsync", "MB/s", RAW, 0.5),
    ("produce 1 KiB, acks=all, fsync", "msgs/s", CLIENT, None),
    ("produce 100 B, acks=all, fsync", "msgs/s", CLIENT, 0.7),
    ("produce 100 B, acks=all, fsync", "MB/s", RAW, None),
    ("fetch 1 KiB (confluent-kafka)", "MB/s", None, None),
    ("fetch 1 KiB (confluent-kafka)", "msgs/s", None, None),
    ("fetch 1 KiB (kafka-python)", "msgs/s", None, None),
    ("broker CPU, produce 1 KiB", "CPU-s/GB", None, None),
    ("broker CPU, produce 100 B", "CPU-s/GB", None, None),
    ("broker CPU, fetch 1 KiB (confluent-kafka)", "CPU-s/GB", None, None),
    ("embedded publish 100 B, batches of 1000", "msgs/s", None, None),
    ("embedded consume 100 B, batches of 1000", "msgs/s", None, None),
    ("spark count(), topic", "rows/s", "Parquet", None),
    ("spark count(), topic", "rows/s", "JSON lines", None),
    ("spark groupBy(key), topic", "rows/s", "Parquet", None),
    ("spark groupBy(key), topic", "rows/s", "JSON lines", None),
    ("spark count(), topic", "rows/s", "no-op Arrow source", 0.8),
    ("spark groupBy(key), topic", "rows/s", "no-op Arrow source", 0.8),
    ("spark count(), read_topic over mirrors", "rows/s", "Parquet", 0.8),
    ("spark streaming sink, path (exactly once)", "rows/s", "no-op Arrow sink", 0.8),
    ("spark streaming sink, wire (seglog serve)", "rows/s", "no-op Arrow sink", 0.8),
    ("spark count(), wire mode", "rows/s", "path mode", None),
    ("spark groupBy(key), read_topic over mirrors", "rows/s", "Parquet", 0.8),
]


STORAGE_PREFIXES = [
    "publish 100 B x1000, fsync",
    "consume x1000 (consume_columns)",
    "open after kill -9",
    "open after clean shutdown (cold cache)",
    "compaction",
]


def _is_number(value: object) -> bool:
    return isinstance(value, int | float) and math.isfinite(value)


@pytest.mark.spark
@pytest.mark.timeout(600)
def test_quick_bench_fills_every_row(tmp_path: Path) -> None:
    out_json, out_md = tmp_path / "bench.json", tmp_path / "bench.md"
    result = subprocess.run(
        [
            str(SEGLOG),
            "bench",
            "--quick",
            "--data-dir",
            str(tmp_path / "work"),
            "--json",
            str(out_json),
            "--markdown",
            str(out_md),
        ],
        capture_output=True,
        text=True,
        check=False,
        timeout=580,
    )
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-4000:]
    report = json.loads(out_json.read_text())
    rows = report["rows"]
    shape = [(r["metric"], r["unit"], r["reference_name"], r["target"]) for r in rows]
    assert shape[: len(EXPECTED_ROWS)] == EXPECTED_ROWS
    # the storage section last: its metric names carry the (tiny) sizes
    storage = [r["metric"] for r in rows[len(EXPECTED_ROWS) :]]
    for prefix in STORAGE_PREFIXES:
        assert any(m.startswith(prefix) for m in storage), (prefix, storage)
    for row in rows:
        assert row["errors"] == [], row
        assert _is_number(row["seglog"]), row
        assert row["seglog"] > 0, row
        # --quick: one repeat (clean opens: one per crash layout)
        assert len(row["seglog_samples"]) == (
            2 if row["metric"].startswith("open after clean") else 1
        ), row
        if row["reference_name"] is not None:
            assert _is_number(row["reference"]), row
            assert row["reference"] > 0, row
            assert _is_number(row["ratio"]), row
            assert row["ratio"] == pytest.approx(row["seglog"] / row["reference"]), row
        if row["target"] is not None:
            assert row["met"] is (row["ratio"] >= row["target"]), row
    assert set(report["machine"]) >= {"nproc", "python", "java", "confluent-kafka", "pyspark"}
    # the work directory is removed, the table is printed and written as markdown
    assert list((tmp_path / "work").iterdir()) == []
    assert "produce 1 KiB, acks=all, fsync" in result.stdout
    markdown = out_md.read_text()
    table_lines = [ln for ln in markdown.splitlines() if ln.startswith("| ")]
    assert len(table_lines) == len(rows) + 1  # header + one line per row
    assert "<= 0.1 s" in markdown  # storage goals are printed beside their rows


def test_report_ratio_and_failures_without_running_anything() -> None:
    ok = Row("m", Samples("MB/s", [1.0, 3.0, 2.0]), "ref", Samples("MB/s", [4.0, 4.0]), 0.5)
    assert ok.ratio == pytest.approx(0.5)
    assert ok.met is True
    broken = Row(
        "n", Samples("msgs/s", error="seglog serve did not start"), "ref", Samples("msgs/s", [1.0])
    )
    assert broken.ratio is not None
    assert math.isnan(broken.ratio)
    report = Report([ok, broken], {"nproc": "2"}, {"repeat": "3"})
    assert report.failed == [broken]
    assert report.notes() == ["n: seglog serve did not start"]
    data = report.to_dict()["rows"]
    assert data[1]["seglog"] is None
    assert data[1]["ratio"] is None
    assert "| m | MB/s | 2.0 | 4.0 (ref) | 0.50x | >= 0.50x ✓ |" in report.markdown()


def test_report_goal_in_words() -> None:
    row = Row("open", Samples("s", [0.012]), goal="<= 0.1 s", goal_met=True)
    assert row.met is True
    assert row.to_dict()["goal"] == "<= 0.1 s"
    text = Report([row], {}, {}).markdown()
    assert "| open | s | 0.012 |  | — | <= 0.1 s ✓ |" in text
