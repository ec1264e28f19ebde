"""A task that fails and is retried leaves no visible duplicate for read_committed readers.

Spark retries tasks only with ``local[N,F]`` (the shared session is ``local[2]``: one try),
and one process holds one SparkContext: the job runs in a subprocess with its own session
(``_retry_job``, the one extra session of the suite). Each task's first attempt produces
~1000 rows in its transaction, then its UDF raises; the second attempt's InitProducerId
(same transactional id: the Spark partition id, not the attempt number) fences and aborts
the first attempt's transaction, then writes every row again.
"""

from __future__ import annotations

import collections
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from seglog.broker import BrokerProcess, start_broker

from ._exactly_once_helpers import consumed, create_topic, spark_read

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    proc = start_broker(tmp_path_factory.mktemp("eos-retry") / "data")
    try:
        yield proc
    finally:
        assert proc.stop() == 0, proc.log_text()
        assert "Traceback" not in proc.log_text(), proc.log_text()


@pytest.mark.timeout(600)
def test_retried_tasks_leave_no_duplicate_for_read_committed(
    spark: Any, broker: BrokerProcess
) -> None:
    topic, rows = "eos-retry", 4000
    create_topic(broker.bootstrap, topic, 1)
    result = subprocess.run(
        [sys.executable, "-m", "tests.spark._retry_job", broker.bootstrap, topic, str(rows)],
        cwd=ROOT, capture_output=True, text=True, timeout=540, check=False,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )  # fmt: skip
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-4000:]
    assert "retried job committed" in result.stdout
    expected = collections.Counter(str(i) for i in range(rows))
    assert consumed(broker.bootstrap, topic, 1, "read_committed") == expected
    assert spark_read(spark, broker.bootstrap, topic, "read_committed") == expected
    # the failed first attempts did write (aborted) records: without transactions these
    # would be duplicates
    uncommitted = consumed(broker.bootstrap, topic, 1, "read_uncommitted")
    assert set(uncommitted) == set(expected)
    twice = {i for i, n in uncommitted.items() if n == 2}
    assert any(int(i) < rows // 2 for i in twice)
    assert any(int(i) >= rows // 2 for i in twice)
    assert max(uncommitted.values()) == 2
