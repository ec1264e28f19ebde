"""The broker's view of topics (log manager): the data directory's topics by name and by
topic id, auto-creation, partition logs, and wake-ups for long-polling fetches.

Runs on the event loop thread. ``Log.on_append`` callbacks may run on storage's fsync
thread, so they only hand a wake-up to the loop (``call_soon_threadsafe``).
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import Callable, Iterable, Mapping

from seglog.errors import UnknownTopicError
from seglog.storage import DataDir, Log, RemotePartition, TopicInfo, validate_topic_name

__all__ = ["TopicManager"]

log = logging.getLogger(__name__)

PartitionKey = tuple[str, int]


class TopicManager:
    """Topics of one :class:`DataDir`, cached by name and id; waiters for new data."""

    def __init__(
        self,
        data_dir: DataDir,
        loop: asyncio.AbstractEventLoop,
        *,
        num_partitions: int = 1,
        auto_create: bool = True,
    ) -> None:
        self.data_dir = data_dir
        self.num_partitions = num_partitions
        self.auto_create = auto_create
        self._loop = loop
        self._by_name: dict[str, TopicInfo] = dict(data_dir.topics())
        self._by_id: dict[uuid.UUID, str] = {t.topic_id: n for n, t in self._by_name.items()}
        self._waiters: dict[PartitionKey, set[asyncio.Future[None]]] = {}
        self._unregister: dict[PartitionKey, Callable[[], None]] = {}
        self._logs: dict[PartitionKey, Log] = {}  # DataDir.log reads topic metadata each call
        self.sync_observer: Callable[[float, int], None] | None = None
        """Given to each partition log opened here (``Log.set_sync_observer``: metrics)."""
        self.on_change: Callable[[], None] | None = None
        """Called after a topic is created, deleted, grown or reconfigured (the metadata
        records DescribeQuorum counts)."""
        self.on_delete: Callable[[str, TopicInfo, list[RemotePartition]], None] | None = None
        """Called after a topic is deleted, with its name, info and its partitions' remote
        objects: the background clean-up of the tier and the Iceberg tables (it must not
        block)."""

    # -- lookup --------------------------------------------------------------------------

    def all(self) -> dict[str, TopicInfo]:
        """Every topic by name (a copy)."""
        return dict(self._by_name)

    def get(self, name: str) -> TopicInfo | None:
        """The topic called ``name`` or None (no name validation, no side effects)."""
        return self._by_name.get(name)

    def by_id(self, topic_id: uuid.UUID) -> TopicInfo | None:
        """The topic with ``topic_id`` or None."""
        name = self._by_id.get(topic_id)
        return None if name is None else self._by_name.get(name)

    def ensure(self, name: str, *, allow_auto_create: bool = True) -> TopicInfo:
        """The topic called ``name``, created with the default partition count when it is
        missing and auto-creation is on (Kafka's ``auto.create.topics.enable``).

        Raises InvalidTopicError (before any path is built) or UnknownTopicError."""
        validate_topic_name(name)
        info = self._by_name.get(name)
        if info is not None:
            return info
        if not (self.auto_create and allow_auto_create):
            raise UnknownTopicError(f"unknown topic {name!r}")
        log.info("auto-creating topic %r with %d partition(s)", name, self.num_partitions)
        return self.create(name, self.num_partitions)

    def cached_log(self, name: str, partition: int) -> Log | None:
        """The partition's Log if it was opened before, else None (a dict lookup: the
        produce hot path's first try)."""
        return self._logs.get((name, partition))

    def log(self, name: str, partition: int) -> Log:
        """The partition's Log. Raises UnknownTopicError for a missing topic or partition."""
        plog = self._logs.get((name, partition))
        if plog is not None:
            return plog
        info = self._by_name.get(name)
        if info is None or not 0 <= partition < info.partitions:
            raise UnknownTopicError(f"unknown topic-partition {name}-{partition}")
        plog = self._logs[(name, partition)] = self.data_dir.log(name, partition)
        plog.set_sync_observer(self.sync_observer)
        return plog

    # -- admin ---------------------------------------------------------------------------

    def create(
        self, name: str, partitions: int, configs: Mapping[str, str] | None = None
    ) -> TopicInfo:
        """Create a topic. Raises InvalidTopicError, TopicExistsError, ValueError (config)."""
        validate_topic_name(name)
        info = self.data_dir.create_topic(name, partitions, configs)
        self._by_name[name] = info
        self._by_id[info.topic_id] = name
        self._changed()
        return info

    def _changed(self) -> None:
        if self.on_change is not None:
            self.on_change()

    def add_partitions(self, name: str, count: int) -> TopicInfo:
        """Grow a topic to ``count`` partitions. Raises UnknownTopicError, ValueError."""
        validate_topic_name(name)
        if name not in self._by_name:
            raise UnknownTopicError(f"unknown topic {name!r}")
        info = self.data_dir.add_partitions(name, count)
        self._by_name[name] = info
        self._changed()
        return info

    def alter_configs(self, name: str, configs: Mapping[str, str]) -> TopicInfo:
        """Replace a topic's config overrides (live: open logs and the retention thread
        see them at once; persisted). Raises UnknownTopicError, ValueError."""
        validate_topic_name(name)
        if name not in self._by_name:
            raise UnknownTopicError(f"unknown topic {name!r}")
        info = self.data_dir.alter_topic_configs(name, configs)
        self._by_name[name] = info
        self._changed()
        return info

    def delete(self, name: str) -> None:
        """Delete a topic and its partitions' data. Raises UnknownTopicError."""
        validate_topic_name(name)
        info = self._by_name.get(name)
        if info is None:
            raise UnknownTopicError(f"unknown topic {name!r}")
        for partition in range(info.partitions):
            key = (name, partition)
            self._logs.pop(key, None)
            unregister = self._unregister.pop(key, None)
            if unregister is not None:
                unregister()
            self._wake(key)
        remote = self.data_dir.delete_topic(name)
        del self._by_name[name]
        self._by_id.pop(info.topic_id, None)
        self._changed()
        if self.on_delete is not None:
            try:
                self.on_delete(name, info, remote)
            except Exception:  # the topic is gone: its clean-up never fails DeleteTopics
                log.exception("clean-up after deleting topic %s failed", name)

    # -- long poll -----------------------------------------------------------------------

    def waiter(self, keys: Iterable[PartitionKey]) -> asyncio.Future[None]:
        """A future completed when any of these partitions' high watermark moves. Register
        it *before* reading, then await it; call :meth:`discard` when done."""
        fut: asyncio.Future[None] = self._loop.create_future()
        for key in keys:
            if key not in self._unregister:
                try:
                    plog = self.log(*key)
                except UnknownTopicError:
                    continue
                self._unregister[key] = plog.on_append(self._callback(key))
            self._waiters.setdefault(key, set()).add(fut)
        return fut

    def discard(self, fut: asyncio.Future[None], keys: Iterable[PartitionKey]) -> None:
        """Forget a waiter made by :meth:`waiter`."""
        for key in keys:
            waiters = self._waiters.get(key)
            if waiters is not None:
                waiters.discard(fut)

    def wake_all(self) -> None:
        """Complete every waiter (shutdown: long polls answer at once)."""
        for key in list(self._waiters):
            self._wake(key)

    def _callback(self, key: PartitionKey) -> Callable[[int], None]:
        def on_append(_high_watermark: int) -> None:
            if self._waiters.get(key):
                self._loop.call_soon_threadsafe(self._wake, key)

        return on_append

    def _wake(self, key: PartitionKey) -> None:
        waiters = self._waiters.pop(key, None)
        for fut in waiters or ():
            if not fut.done():
                fut.set_result(None)

    def close(self) -> None:
        """Unregister every append callback (before the data directory closes)."""
        for unregister in self._unregister.values():
            unregister()
        self._unregister.clear()
        self.wake_all()
