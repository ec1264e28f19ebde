"""Samples of the Spark phase, kept apart from ``_spark`` so that a run without pyspark
can still report the Spark rows as failed."""

from __future__ import annotations

from dataclasses import dataclass, field

from seglog.bench._report import Samples

__all__ = ["SOURCES", "SinkResults", "SparkResults"]

SOURCES = ("seglog", "parquet", "json", "ceiling", "mirrors")
"""format("seglog"); Spark's Parquet and JSON lines readers on the same records; the no-op
Arrow data source (the Python Data Source API's ceiling); ``read_topic`` over Parquet
mirrors of the topic's closed segments."""


@dataclass
class SinkResults:
    """rows/s samples: sink ceiling, path sink, wire sink; reads by path and by wire."""

    ceiling: Samples = field(default_factory=lambda: Samples("rows/s"))
    path: Samples = field(default_factory=lambda: Samples("rows/s"))
    wire: Samples = field(default_factory=lambda: Samples("rows/s"))
    read_path: Samples = field(default_factory=lambda: Samples("rows/s"))
    read_wire: Samples = field(default_factory=lambda: Samples("rows/s"))

    def fail(self, error: str) -> None:
        """Record ``error`` for every measurement."""
        for samples in (self.ceiling, self.path, self.wire, self.read_path, self.read_wire):
            samples.error = samples.error or error


@dataclass
class SparkResults:
    """rows/s samples per source (``SOURCES``) for count() and for groupBy(key)."""

    count: dict[str, Samples] = field(
        default_factory=lambda: {s: Samples("rows/s") for s in SOURCES}
    )
    group_by: dict[str, Samples] = field(
        default_factory=lambda: {s: Samples("rows/s") for s in SOURCES}
    )
    sink: SinkResults = field(default_factory=SinkResults)
    """The streaming sink and wire reads (``_spark_io``)."""

    def fail(self, source: str, error: str) -> None:
        """Record ``error`` for every measurement of ``source``."""
        self.count[source].error = self.count[source].error or error
        self.group_by[source].error = self.group_by[source].error or error
