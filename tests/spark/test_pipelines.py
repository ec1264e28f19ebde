"""The pipeline library (``examples/pipelines``) on the real data, each result against pandas.

One ``seglog serve`` with topics ``flights-by-time`` (all 336,776 flights in scheduled-time
order) and ``planes`` (a compacted changelog with updates and tombstones); the pipelines run
on the shared SparkSession through the broker (wire mode).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
from examples.flights.broker import running_broker
from examples.pipelines import planes
from examples.pipelines.run import LATE_RECORDS, load_inputs, run_all

import seglog.spark


def _assert_same(actual: pd.DataFrame, expected: pd.DataFrame, means: tuple[str, ...] = ()) -> None:
    keys = [c for c in expected.columns if c not in means]
    pd.testing.assert_frame_equal(actual[keys], expected[keys], check_exact=True)
    for name in means:
        np.testing.assert_allclose(
            actual[name].to_numpy(), expected[name].to_numpy(), rtol=0, atol=1e-9, err_msg=name
        )


@pytest.mark.spark
@pytest.mark.timeout(1200)
def test_pipelines_equal_pandas(spark: Any, tmp_path: Path) -> None:
    seglog.spark.register(spark)
    chart = tmp_path / "delay_by_hour.png"
    with running_broker(tmp_path / "broker", tmp_path / "broker.log") as bootstrap:
        load_inputs(bootstrap)
        results = run_all(spark, bootstrap, tmp_path, chart)
        # the changelog topic read back as a table: updates applied, tombstones removed
        table = planes.planes_table(spark, bootstrap).toPandas()
    # windows: every finished (origin, hour) window, exactly the departures pandas counts
    assert len(results.windows_expected) > 3 * 300 * 15
    _assert_same(results.windows, results.windows_expected)
    # late records (older than the watermark) are dropped: nothing changed, and Spark says so
    _assert_same(results.windows_after_late, results.windows_expected)
    assert 0 < results.windows_dropped <= LATE_RECORDS
    _assert_same(results.weather, results.weather_expected, ("mean_dep_delay_min",))
    assert set(results.weather["visibility"]) == {"< 1 mi", "1-5 mi", ">= 5 mi"}
    _assert_same(results.planes, results.planes_expected, ("mean_dep_delay_min",))
    assert not set(planes.RENAMES) & set(table["manufacturer"])
    assert table["year"].notna().all()
    assert table["tailnum"].is_unique
    _assert_same(results.delay_by_hour, results.delay_by_hour_expected, ("mean_dep_delay_min",))
    assert chart.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
