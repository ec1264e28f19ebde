"""The flights pipeline, unchanged, on a Spark standalone cluster: a master and two workers
on loopback (each a JVM of its own, executors in further JVMs with their own Python
workers), reading topic ``flights`` by path (executors read the segment files) and through
``seglog serve`` (executors fetch over the wire). Both results equal pandas'."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
from examples.flights.data import reference_delays
from examples.flights.pipeline import normalize

from ._cluster import standalone_cluster
from .test_flights_pipeline import assert_same_table

ROOT = Path(__file__).resolve().parents[2]


def _run_demo(master: str, source: str, work: Path) -> Path:
    out = work / f"out-{source}.parquet"
    result = subprocess.run(
        [sys.executable, "-m", "examples.flights", "--master", master, "--source", source,
         "--work-dir", str(work / f"demo-{source}"), "--out", str(out)],
        cwd=ROOT, capture_output=True, text=True, timeout=900, check=False,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )  # fmt: skip
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-4000:]
    assert f"({master})" in result.stdout
    return out


@pytest.mark.spark
@pytest.mark.timeout(1500)
def test_flights_on_a_standalone_cluster_by_path_and_by_wire(tmp_path: Path) -> None:
    expected = reference_delays()
    with standalone_cluster(tmp_path / "cluster", workers=2) as cluster:
        for source in ("path", "wire"):
            out = _run_demo(cluster.master_url, source, tmp_path)
            # the output, read without Spark, equals the pandas computation
            assert_same_table(normalize(pd.read_parquet(out)), expected)
        # the work really ran in executors started by both workers
        state = cluster.state()
        assert len(state["workers"]) == 2  # type: ignore[arg-type]
        apps = state["completedapps"]
        assert len(apps) == 2, apps  # type: ignore[arg-type]
        used = {d.parents[1] for d in cluster.executor_dirs()}
        assert used == set(cluster.work_dirs)
    for process in cluster.processes:
        assert process.poll() is not None  # every process started was stopped
