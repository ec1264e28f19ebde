"""The broker's Iceberg committer: the records of every topic with ``seglog.iceberg.mode``
set are appended to the topic's Iceberg table (``seglog.iceberg``) by one daemon thread
(``seglog-iceberg``), never on the event loop.

Every :data:`POLL_S` it looks at each Iceberg topic's partitions (in memory: the segment
list and the high watermark) and commits, in one append (one snapshot) per topic:

- every closed segment not committed yet, as soon as a roll closed it;
- the active segment's records up to the high watermark too, once the table's last
  commit is ``seglog.iceberg.lag.ms`` old (a snapshot of the tail, as ``read_topic``
  takes one), so the table never lags the log by much more than that.

``key_value`` topics go through ``seglog.iceberg.commit_ranges``; ``value_schema`` topics
through ``commit_values``, with the schema registry's schemas followed from the
``_schemas`` topic (a ``SchemaLookup`` refreshed before each commit) and undecodable values
sent to the dead-letter table ``seglog.<topic>~dlq``.

Exactly once: the offsets a table holds are read back from its snapshot summary
(``seglog.offsets.<partition>``) when the broker starts or after a failed commit, and
each commit starts where they say; a crash between writing data files and the catalog
commit leaves only unreferenced files. Records retention removed before they were
committed are skipped (logged). pyiceberg is imported only when a topic turns Iceberg
on; without it (``pip install 'seglog[iceberg]'``) an error is logged and nothing else
changes. A failing commit (catalog unreachable, disk full) is retried with a doubling
backoff up to :data:`MAX_BACKOFF_S`, the log untouched.
"""

from __future__ import annotations

import logging
import threading
import time
import uuid
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from seglog import iceberg
from seglog.broker.log.internal_topics import SCHEMAS_TOPIC
from seglog.broker.log.periodic import PeriodicThread
from seglog.errors import SeglogError
from seglog.iceberg import iceberg_lag_ms, iceberg_mode
from seglog.storage import DataDir, Log, SegmentInfo, TopicInfo

if TYPE_CHECKING:
    from seglog.iceberg import OffsetRange

__all__ = ["MAX_BACKOFF_S", "MAX_COMMIT_BYTES", "POLL_S", "TOPICS_S", "IcebergTask"]

log = logging.getLogger(__name__)

POLL_S = 0.2
"""Seconds between two looks at the Iceberg topics' segment lists (in-memory reads)."""
TOPICS_S = 2.0
"""Seconds between two reads of the topic list and configs (``__topics/*.json``)."""
MAX_COMMIT_BYTES = 256 << 20
"""Most bytes of stored batches one commit reads per topic (whole segments, at least one):
a backlog (a restart after a long stop) is committed in several snapshots, memory
bounded."""
MAX_BACKOFF_S = 30.0
"""Longest wait before retrying a topic whose commit failed."""


@dataclass
class _TopicTable:
    """A topic's table as the committer knows it."""

    table: Any  # pyiceberg.table.Table (pyiceberg is imported on first use)
    topic_id: uuid.UUID
    mode: str
    committed: dict[int, int]
    dlq_committed: dict[int, int] = field(default_factory=dict)
    """value_schema: partition → next offset the dead-letter table covers."""
    last_commit: float = field(default_factory=time.monotonic)


@dataclass
class _Failure:
    retry_at: float
    backoff_s: float


class IcebergTask:
    """The committer thread: ``start()``, then ``stop()`` before the data directory closes
    (it finishes the commit in progress). ``run_once()`` is one pass (tests call it)."""

    def __init__(
        self,
        data_dir: DataDir,
        catalog_properties: dict[str, str],
        *,
        poll_s: float = POLL_S,
        remote_warehouse: str | None = None,
    ) -> None:
        self.data_dir = data_dir
        self.catalog_properties = catalog_properties
        self.remote_warehouse = remote_warehouse
        """Where the tables of tiered topics (``remote.storage.enable``) are created:
        ``<seglog.remote.storage.url>/iceberg/warehouse``; None: the catalog's warehouse."""
        self.poll_s = poll_s
        self.commits = 0
        """Snapshots committed since start."""
        self.last_commit_s = 0.0
        """Wall time of the last commit (read, decode, write, catalog), seconds."""
        self._catalog: Any = None
        self._schemas: Any = None  # seglog.iceberg.SchemaLookup, made on first use
        self._unavailable = False  # pyiceberg missing: logged once
        self._tables: dict[str, _TopicTable] = {}
        self._failures: dict[str, _Failure] = {}
        self._topics: dict[str, TopicInfo] = {}
        self._topics_at = -TOPICS_S
        self._drops: dict[tuple[str, uuid.UUID], _Failure | None] = {}
        """Deleted topics whose tables are to be dropped → their last failure (None: none)."""
        self._drops_guard = threading.Lock()
        self._thread = PeriodicThread("seglog-iceberg", poll_s, self.run_once, what="iceberg")

    def start(self) -> None:
        """Start the thread."""
        self._thread.start()

    def stop(self) -> None:
        """Stop after the commit in progress; idempotent."""
        self._thread.stop()

    def drop_topic(self, topic: str, topic_id: uuid.UUID) -> None:
        """Drop the tables of ``topic`` (deleted; id ``topic_id``) on the next pass.
        Thread-safe, never blocks on the catalog."""
        with self._drops_guard:
            self._drops.setdefault((topic, topic_id), None)
            self._topics_at = -TOPICS_S  # the next pass re-reads the topic list

    @property
    def pending_drops(self) -> int:
        """Deleted topics whose tables are not dropped yet."""
        with self._drops_guard:
            return len(self._drops)

    def _run_drops(self) -> None:
        """Drop the deleted topics' tables that are due; a failure backs off."""
        with self._drops_guard:
            due = [k for k, f in self._drops.items() if f is None or time.monotonic() >= f.retry_at]
        for topic, topic_id in due:
            state = self._tables.get(topic)
            if state is not None and state.topic_id == topic_id:
                del self._tables[topic]
            self._failures.pop(topic, None)
            try:
                if self._catalog is None:
                    self._catalog = iceberg.open_catalog(self.catalog_properties)
                dropped = iceberg.drop_topic_tables(self._catalog, topic, topic_id)
            except (ImportError, ModuleNotFoundError) as exc:
                log.error("cannot drop the Iceberg tables of topic %s: %s", topic, exc)
                with self._drops_guard:
                    self._drops.pop((topic, topic_id), None)
                continue
            except Exception as exc:
                self._catalog = None
                with self._drops_guard:
                    previous = self._drops.get((topic, topic_id))
                    backoff = (
                        min(MAX_BACKOFF_S, previous.backoff_s * 2) if previous else self.poll_s
                    )
                    self._drops[(topic, topic_id)] = _Failure(time.monotonic() + backoff, backoff)
                log.warning("dropping the Iceberg tables of deleted topic %s failed (retry in "
                            "%.1f s): %r", topic, backoff, exc)  # fmt: skip
                continue
            with self._drops_guard:
                self._drops.pop((topic, topic_id), None)
            log.info("iceberg tables of deleted topic %s dropped: %s", topic, dropped or "none")

    def run_once(self) -> int:
        """One pass: the deleted topics' tables dropped, then the Iceberg topics committed;
        returns the snapshots committed."""
        made = 0
        if self._drops:
            self._run_drops()
        if time.monotonic() - self._topics_at >= TOPICS_S:
            self._topics = self.data_dir.topics()
            self._topics_at = time.monotonic()
        topics = self._topics
        for gone in set(self._tables) - set(topics):
            del self._tables[gone]
        for name, info in topics.items():
            if self._thread.stopping or self._unavailable:
                break
            if iceberg_mode(info.configs) is None:
                self._tables.pop(name, None)
                continue
            failure = self._failures.get(name)
            if failure is not None and time.monotonic() < failure.retry_at:
                continue
            try:
                made += self._commit_topic(name, info)
            except (ImportError, ModuleNotFoundError) as exc:
                self._unavailable = True
                log.error(
                    "%s on topic %s needs pyiceberg (pip install 'seglog[iceberg]'): %s",
                    iceberg.MODE_CONFIG, name, exc,
                )  # fmt: skip
            except Exception as exc:
                self._failed(name, exc)
            else:
                self._failures.pop(name, None)
        return made

    def _failed(self, topic: str, exc: Exception) -> None:
        """Forget the topic's table (reloaded, offsets and all, before the retry) and back
        off."""
        self._tables.pop(topic, None)
        previous = self._failures.get(topic)
        backoff = min(MAX_BACKOFF_S, previous.backoff_s * 2) if previous else self.poll_s
        self._failures[topic] = _Failure(time.monotonic() + backoff, backoff)
        log.warning("iceberg commit of topic %s failed (retry in %.1f s): %r", topic, backoff, exc)

    def _table(self, topic: str, info: TopicInfo) -> _TopicTable:
        mode = iceberg_mode(info.configs) or iceberg.KEY_VALUE
        state = self._tables.get(topic)
        if state is not None and state.topic_id == info.topic_id and state.mode == mode:
            return state
        if self._catalog is None:
            self._catalog = iceberg.open_catalog(self.catalog_properties)
        location = self._location(topic, info)
        table = iceberg.load_topic_table(self._catalog, topic, mode=mode, location=location)
        if iceberg.stale_table(table, info.topic_id):
            table = self._recreate(topic, mode=mode, location=location)
        committed = iceberg.committed_offsets(table, info.topic_id)
        state = _TopicTable(table, info.topic_id, mode, committed)
        if mode == iceberg.VALUE_SCHEMA:
            try:
                dlq = iceberg.load_topic_table(self._catalog, topic, create=False, dlq=True)
            except Exception:  # NoSuchTableError: made with its first row
                dlq = None
            if dlq is not None and iceberg.stale_table(dlq, info.topic_id):
                dlq = None
                self._catalog.purge_table(iceberg.table_identifier(topic, dlq=True))
            if dlq is not None:
                state.dlq_committed = iceberg.committed_offsets(dlq, info.topic_id)
        self._tables[topic] = state
        log.info("iceberg table %s (%s): committed offsets %s", iceberg.table_name(topic),
                 mode, committed)  # fmt: skip
        return state

    def _location(self, topic: str, info: TopicInfo, *, dlq: bool = False) -> str | None:
        """A new table's location: on the object store for a tiered topic when the broker
        has a remote warehouse, else None (the catalog's warehouse)."""
        if self.remote_warehouse is None or not iceberg.tiered(info.configs):
            return None
        return iceberg.table_location(self.remote_warehouse, topic, dlq=dlq)

    def _recreate(self, topic: str, *, mode: str, location: str | None) -> Any:
        """Purge a table that holds a deleted topic's rows and create it afresh."""
        log.warning("iceberg table %s holds the rows of a deleted topic of that name: "
                    "dropped", iceberg.table_name(topic))  # fmt: skip
        self._catalog.purge_table(iceberg.table_identifier(topic))
        return iceberg.load_topic_table(self._catalog, topic, mode=mode, location=location)

    def _dlq(self, topic: str) -> Any:
        """The dead-letter table of ``topic``, created on first use."""
        info = self._topics.get(topic)
        location = None if info is None else self._location(topic, info, dlq=True)
        return iceberg.load_topic_table(self._catalog, topic, dlq=True, location=location)

    def _commit_values(
        self, state: _TopicTable, topic: str, logs: dict[int, Log], ranges: list[OffsetRange]
    ) -> Any:
        """A ``value_schema`` commit: the registry's new schemas first."""
        if self._schemas is None:
            self._schemas = iceberg.SchemaLookup()
        if SCHEMAS_TOPIC in self._topics:
            self._schemas.refresh(self.data_dir.log(SCHEMAS_TOPIC, 0))
        done = iceberg.commit_values(
            state.table,
            lambda: self._dlq(topic),
            topic=topic,
            topic_id=state.topic_id,
            logs=logs,
            ranges=ranges,
            committed=state.committed,
            dlq_committed=state.dlq_committed,
            lookup=self._schemas,
        )
        state.dlq_committed = done.dlq_offsets
        if done.dlq_rows:
            log.warning("iceberg %s: %d record(s) to the dead-letter table %s",
                        iceberg.table_name(topic), done.dlq_rows,
                        iceberg.dlq_table_name(topic))  # fmt: skip
        return done.report

    def _commit_topic(self, topic: str, info: TopicInfo) -> int:
        """Commit what is due on one topic; 1 if a snapshot was made, else 0."""
        state = self._table(topic, info)
        now = time.monotonic()
        lag_due = now - state.last_commit >= iceberg_lag_ms(info.configs) / 1000
        logs: dict[int, Log] = {}
        ranges: list[OffsetRange] = []
        budget = MAX_COMMIT_BYTES
        for partition in range(info.partitions):
            try:
                plog = self.data_dir.log(topic, partition)
                segments = plog.segments()
                high = plog.last_stable_offset  # committed records only (read_committed)
                low = plog.log_start_offset
            except SeglogError as exc:  # deleted or closed meanwhile
                log.debug("iceberg skipped %s-%d: %s", topic, partition, exc)
                continue
            end = high if lag_due else min(segments[-1].base_offset, high)
            start = state.committed.get(partition, low)
            if start < low:
                log.warning(
                    "iceberg %s-%d: offsets %d..%d were removed by retention before they "
                    "were committed to the table", topic, partition, start, low - 1,
                )  # fmt: skip
                start = low
            end, budget = _bounded(segments, start, end, budget)
            if end > start:
                logs[partition] = plog
                ranges.append(iceberg.OffsetRange(partition, start, end))
        if not ranges:
            if lag_due:
                state.last_commit = now
            return 0
        if state.mode == iceberg.VALUE_SCHEMA:
            report = self._commit_values(state, topic, logs, ranges)
        else:
            report = iceberg.commit_ranges(
                state.table,
                topic=topic,
                topic_id=info.topic_id,
                logs=logs,
                ranges=ranges,
                committed=state.committed,
            )
        state.committed = report.offsets
        state.last_commit = now
        self.commits += 1
        self.last_commit_s = report.seconds
        log.info(
            "iceberg %s: %d row(s) committed in %.3f s, offsets %s",
            iceberg.table_name(topic), report.rows, report.seconds, report.offsets,
        )  # fmt: skip
        return 1


def _bounded(segments: list[SegmentInfo], start: int, end: int, budget: int) -> tuple[int, int]:
    """``(end, budget left)``: ``end`` lowered to a segment boundary so that the segments
    read from ``start`` hold at most ``budget`` bytes (but at least the first segment when
    the budget is not spent)."""
    if budget <= 0:
        return start, 0
    for seg in segments:
        if seg.next_offset <= start or seg.base_offset >= end:
            continue
        if seg.size > budget and seg.base_offset > start:
            return seg.base_offset, 0
        budget -= seg.size
    return end, budget
