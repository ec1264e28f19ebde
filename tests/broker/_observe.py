"""What a running broker shows from outside: its Prometheus metrics (``--metrics-listen``),
read to wait for a state (a fetch parked in its long poll) instead of sleeping."""

from __future__ import annotations

import re
import urllib.request
from typing import Protocol

from prometheus_client.parser import text_string_to_metric_families
from tests._wait import wait_until

METRICS_ARGS = ("--metrics-listen", "127.0.0.1:0")
"""``seglog serve`` flags for a metrics endpoint on a free port (``metrics_port``)."""


class _Logs(Protocol):  # a BrokerProcess
    def log_text(self) -> str: ...


def metrics_port(proc: _Logs) -> int:
    """The port of ``--metrics-listen 127.0.0.1:0``, from the broker's log line."""
    pattern = r"metrics on http://127\.0\.0\.1:(\d+)/"
    found = wait_until(
        lambda: re.search(pattern, proc.log_text()), message=f"no metrics line: {proc.log_text()}"
    )
    return int(found.group(1))


def metric(port: int, name: str, labels: dict[str, str] | None = None) -> float | None:
    """The value of the sample ``name`` (with ``labels``) at ``/metrics``, or None."""
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as resp:
        text = resp.read().decode()
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name == name and (labels or {}).items() <= sample.labels.items():
                return float(sample.value)
    return None


def fetches_waiting(port: int) -> float:
    """The broker's ``seglog_fetches_waiting`` gauge: fetches parked in a long poll (the
    fetch purgatory). It is read on the broker's event loop, so a fetch it counts has
    already found nothing to answer and awaits a wake-up."""
    value = metric(port, "seglog_fetches_waiting")
    if value is None:
        raise AssertionError("no seglog_fetches_waiting gauge")
    return value


def wait_fetches_waiting(port: int, n: int, timeout: float = 15) -> None:
    """Wait until ``n`` fetches are parked in the broker's long poll."""
    wait_until(
        lambda: fetches_waiting(port) >= n,
        timeout=timeout,
        message=f"{n} fetch(es) never parked in the broker",
    )
