"""DataDir: the topics of a broker, as Kafka lays them out on disk.

``<dir>/<topic>-<partition>/`` per partition (a :class:`Log`) with Kafka's
``partition.metadata`` (``version: 0`` / ``topic_id: <base64url uuid>``), topic metadata in
``<dir>/__topics/<topic>.json`` (name, topic_id, partitions, configs), and a writer lock
``<dir>/.lock`` (exclusive ``fcntl.flock``). Topic names follow Kafka's rule and are
validated before any path is built.

Thread-safety: every method may be called from any thread (the broker's loop thread and
the logs' fsync threads); one internal lock serialises topic creation/deletion and the
log cache.
"""

from __future__ import annotations

import base64
import contextlib
import fcntl
import json
import os
import pathlib
import re
import shutil
import threading
import uuid
from collections.abc import Mapping
from typing import NamedTuple

from seglog.errors import (
    DataDirLockedError,
    DirectoryNotFoundError,
    InvalidTopicError,
    ReadOnlyError,
    StorageError,
    TopicExistsError,
    UnknownTopicError,
)
from seglog.storage.config import LogConfig, check_tiered_cleanup_policy
from seglog.storage.fileio import files
from seglog.storage.log import maint
from seglog.storage.log.log import Log
from seglog.storage.remote.manifest import Manifest
from seglog.storage.remote.purge import RemotePartition
from seglog.storage.remote.store import RemoteStorage
from seglog.storage.remote.tier import partition_key

__all__ = ["MAX_PARTITIONS", "DataDir", "TopicInfo", "validate_topic_name"]

_TOPIC_RE = re.compile(r"[a-zA-Z0-9._-]{1,249}")
_TOPICS_DIR = "__topics"
MAX_PARTITIONS = 100_000
"""Partitions a topic holds at most (``create_topic`` refuses more: ValueError; the broker
answers 37 INVALID_PARTITIONS)."""


def validate_topic_name(name: str) -> None:
    """Kafka's topic name rule: ``[a-zA-Z0-9._-]``, 1-249 characters, not "." or "..".
    Raises InvalidTopicError."""
    if not isinstance(name, str) or not _TOPIC_RE.fullmatch(name) or name in (".", ".."):
        raise InvalidTopicError(f"invalid topic name {name!r}")


class TopicInfo(NamedTuple):
    """A topic of a data directory."""

    name: str
    """Topic name (Kafka's rule)."""
    topic_id: uuid.UUID
    """Stable, non-zero topic id (uuid4), persisted."""
    partitions: int
    """Number of partitions (0..partitions-1)."""
    configs: dict[str, str]
    """Topic configs by Kafka name (segment.bytes, ...) as given at creation."""


def _topic_id_text(topic_id: uuid.UUID) -> str:
    """Kafka's text form of a topic id: base64url without padding."""
    return base64.urlsafe_b64encode(topic_id.bytes).decode().rstrip("=")


class DataDir:
    """A broker data directory (see the module docstring).

    ``create``: make ``path`` if missing. ``read_only``: take no lock, never write (a
    reader beside a live broker). ``default_config``: LogConfig for topics, overridden by
    each topic's configs. ``remote``: the object store of the topics with
    ``remote.storage.enable`` (tiered storage). Raises DataDirLockedError if another
    writer holds the lock, DirectoryNotFoundError if missing and not ``create`` (or
    ``read_only``).
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        create: bool = True,
        read_only: bool = False,
        default_config: LogConfig | None = None,
        remote: RemoteStorage | None = None,
    ) -> None:
        self.path = pathlib.Path(path)
        self.remote = remote
        """The object store of topics with ``remote.storage.enable`` (tiered storage)."""
        self.read_only = read_only
        self.default_config = default_config or LogConfig()
        self._lock = threading.RLock()
        self._logs: dict[tuple[str, int], Log] = {}
        self._log_topic_ids: dict[tuple[str, int], uuid.UUID] = {}
        """The topic id each cached log was opened for (a read-only DataDir sees the
        writer delete a topic and create another of the same name)."""
        self._topic_cache: dict[str, TopicInfo] = {}
        self._lock_fd: int | None = None
        self._closed = False
        if not self.path.is_dir():
            if not create or read_only:
                raise DirectoryNotFoundError(f"no data directory {self.path}")
            self.path.mkdir(parents=True, exist_ok=True)
        if not read_only:
            fd = os.open(self.path / ".lock", os.O_RDWR | os.O_CREAT, 0o644)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError as e:
                os.close(fd)
                raise DataDirLockedError(f"{self.path} is locked by another process") from e
            self._lock_fd = fd
            (self.path / _TOPICS_DIR).mkdir(exist_ok=True)
            self._finish_deletes()

    def _meta_path(self, name: str) -> pathlib.Path:
        validate_topic_name(name)
        return self.path / _TOPICS_DIR / f"{name}.json"

    def _check_writable(self) -> None:
        if self._closed:
            raise StorageError("data directory closed")
        if self.read_only:
            raise ReadOnlyError(f"data directory {self.path} is open read-only")

    def topics(self) -> dict[str, TopicInfo]:
        """Every topic by name, read from ``__topics/*.json``."""
        out: dict[str, TopicInfo] = {}
        tdir = self.path / _TOPICS_DIR
        if not tdir.is_dir():
            return out
        for p in sorted(tdir.glob("*.json")):
            try:
                info = self._read_meta(p)
            except (ValueError, KeyError, InvalidTopicError):
                continue
            out[info.name] = info
        return out

    @staticmethod
    def _read_meta(p: pathlib.Path) -> TopicInfo:
        d = json.loads(p.read_text())
        validate_topic_name(d["name"])
        return TopicInfo(d["name"], uuid.UUID(d["topic_id"]), int(d["partitions"]), d["configs"])

    def topic(self, name: str) -> TopicInfo:
        """One topic; UnknownTopicError if missing, InvalidTopicError on a bad name.
        (A writer caches topic metadata: it is the only one changing it.)"""
        p = self._meta_path(name)
        cached = self._topic_cache.get(name)
        if cached is not None:
            return cached
        try:
            info = self._read_meta(p)
        except FileNotFoundError:
            raise UnknownTopicError(f"unknown topic {name!r}") from None
        if not self.read_only:
            self._topic_cache[name] = info
        return info

    def create_topic(
        self, name: str, partitions: int, configs: Mapping[str, str] | None = None
    ) -> TopicInfo:
        """Create ``name`` with ``partitions`` empty partition logs; configs by Kafka name.
        Raises InvalidTopicError, TopicExistsError, ValueError (partitions, configs; a
        tiered topic that ``cleanup.policy`` compacts: ``check_tiered_cleanup_policy``)."""
        meta = self._meta_path(name)
        self._check_writable()
        if not 1 <= partitions <= MAX_PARTITIONS:
            raise ValueError(f"partitions must be in [1, {MAX_PARTITIONS}]")
        configs = dict(configs or {})
        config = self._config_for(configs, check=True)
        with self._lock:
            if meta.exists():
                raise TopicExistsError(f"topic {name!r} already exists")
            topic_id = uuid.uuid4()
            while topic_id.int == 0:  # Kafka reserves the zero uuid
                topic_id = uuid.uuid4()
            for p in range(partitions):
                pdir = self.path / f"{name}-{p}"
                if pdir.exists():
                    shutil.rmtree(pdir)  # leftover of an interrupted create
                Log.open(pdir, config, create=True).close()
                files.write_small_file(
                    pdir / files.PARTITION_METADATA,
                    f"version: 0\ntopic_id: {_topic_id_text(topic_id)}\n".encode(),
                )
            info = TopicInfo(name, topic_id, partitions, configs)
            doc = {"name": name, "topic_id": str(topic_id), "partitions": partitions}
            files.write_small_file(meta, json.dumps({**doc, "configs": configs}).encode())
            return info

    def add_partitions(self, name: str, count: int) -> TopicInfo:
        """Grow topic ``name`` to ``count`` partitions (Kafka's CreatePartitions: partitions
        are only ever added; existing ones keep their data). The new partition directories
        are created first, then the topic metadata is replaced atomically, so a crash
        leaves the old count (leftover directories are replaced on the next try).

        Raises UnknownTopicError, ValueError (``count`` not above the current count or over
        the limit), ReadOnlyError."""
        self._check_writable()
        meta = self._meta_path(name)
        with self._lock:
            try:
                info = self._read_meta(meta)
            except FileNotFoundError:
                raise UnknownTopicError(f"unknown topic {name!r}") from None
            if count <= info.partitions:
                raise ValueError(
                    f"topic {name!r} has {info.partitions} partitions: the new count "
                    f"{count} must be higher"
                )
            if count > MAX_PARTITIONS:
                raise ValueError(f"partitions must be in [1, {MAX_PARTITIONS}]")
            config = self._config_for(info.configs)
            for p in range(info.partitions, count):
                pdir = self.path / f"{name}-{p}"
                if pdir.exists():
                    shutil.rmtree(pdir)  # leftover of an interrupted add
                Log.open(pdir, config, create=True).close()
                files.write_small_file(
                    pdir / files.PARTITION_METADATA,
                    f"version: 0\ntopic_id: {_topic_id_text(info.topic_id)}\n".encode(),
                )
            grown = info._replace(partitions=count)
            doc = {"name": name, "topic_id": str(info.topic_id), "partitions": count}
            files.write_small_file(meta, json.dumps({**doc, "configs": info.configs}).encode())
            self._topic_cache.pop(name, None)
            return grown

    def alter_topic_configs(self, name: str, configs: Mapping[str, str]) -> TopicInfo:
        """Replace topic ``name``'s configs (Kafka names → values; what is not named falls
        back to the data directory's defaults). The topic metadata is replaced atomically
        (fsynced); open partition logs take the new LogConfig at once (segment roll, size
        limits and flush settings apply from their next append).

        Raises UnknownTopicError, ValueError (a bad LogConfig value, a tiered topic that
        ``cleanup.policy`` compacts), ReadOnlyError."""
        self._check_writable()
        meta = self._meta_path(name)
        configs = dict(configs)
        config = self._config_for(configs, check=True)
        with self._lock:
            try:
                info = self._read_meta(meta)
            except FileNotFoundError:
                raise UnknownTopicError(f"unknown topic {name!r}") from None
            altered = info._replace(configs=configs)
            doc = {"name": name, "topic_id": str(info.topic_id), "partitions": info.partitions}
            files.write_small_file(meta, json.dumps({**doc, "configs": configs}).encode())
            self._topic_cache.pop(name, None)
            for p in range(info.partitions):
                log = self._logs.get((name, p))
                if log is not None:
                    log.config = config
                    if config.remote_storage_enable and self.remote is not None:
                        maint.attach_tier(log, self.remote)
            return altered

    def _config_for(self, configs: Mapping[str, str], *, check: bool = False) -> LogConfig:
        """The LogConfig of a topic with ``configs`` over the defaults; ``check``: refuse
        (ValueError) what a new config may not be, not what an existing topic has."""
        merged = {**self.default_config.to_kafka_configs(), **configs}
        if check:
            check_tiered_cleanup_policy(merged)
        return LogConfig.from_kafka_configs(merged)

    def delete_topic(self, name: str) -> list[RemotePartition]:
        """Close and remove every partition of ``name`` (renamed to
        ``<topic>-<p>.<uuidhex>-delete`` first, as Kafka, then removed). Returns the
        partitions' remote objects (tiered storage), for the caller to delete with
        ``purge_partition`` (a store call: it may fail or be slow, so it is not made here).
        Raises InvalidTopicError, UnknownTopicError."""
        info = self.topic(name)
        self._check_writable()
        tiered = info.configs.get("remote.storage.enable", "").strip().lower() == "true"
        remote: list[RemotePartition] = []
        with self._lock:
            for p in range(info.partitions):
                part = self._remote_partition(self.path / f"{name}-{p}", tiered=tiered)
                if part is not None:
                    remote.append(part)
            for p in range(info.partitions):
                log = self._logs.pop((name, p), None)
                if log is not None:
                    log.close()
            self._topic_cache.pop(name, None)
            self._meta_path(name).unlink()
            files.fsync_dir(self.path / _TOPICS_DIR)
            for p in range(info.partitions):
                pdir = self.path / f"{name}-{p}"
                if not pdir.exists():
                    continue
                # cap the name: 249-char topic + "-NNNNN" + "." + 32 hex + "-delete" > 255
                stem = f"{name}-{p}"[:200]
                target = self.path / f"{stem}.{uuid.uuid4().hex}-delete"
                pdir.rename(target)
            files.fsync_dir(self.path)
            self._finish_deletes()
        return remote

    def _remote_partition(self, pdir: pathlib.Path, *, tiered: bool) -> RemotePartition | None:
        """Where a partition's remote objects are: its manifest copy's store and prefix,
        else the data directory's store when the topic is tiered; None when neither."""
        local = Manifest.read_local(pdir)
        if local is not None:
            settings = RemoteStorage(local.url, local.endpoint_url)
            if self.remote is not None and self.remote.url == local.url:
                settings = self.remote
            return RemotePartition(settings, local.partition)
        if tiered and self.remote is not None and pdir.exists():
            return RemotePartition(self.remote, partition_key(pdir))
        return None

    def _finish_deletes(self) -> None:
        for p in self.path.glob("*-delete"):
            if p.is_dir():
                shutil.rmtree(p, ignore_errors=True)

    def log(self, topic: str, partition: int) -> Log:
        """The partition's Log, opened once and cached (read-only in a read-only DataDir).
        Raises InvalidTopicError, UnknownTopicError (topic or partition)."""
        info = self.topic(topic)
        if not 0 <= partition < info.partitions:
            raise UnknownTopicError(f"topic {topic!r} has no partition {partition}")
        with self._lock:
            if self._closed:
                raise StorageError("data directory closed")
            log = self._logs.get((topic, partition))
            if log is not None and self._log_topic_ids.get((topic, partition)) != info.topic_id:
                # the writer deleted the topic and created it again: the cached log is
                # the deleted one's (its files gone)
                del self._logs[(topic, partition)]
                log.close()
                log = None
            if log is None:
                log = Log.open(
                    self.path / f"{topic}-{partition}",
                    self._config_for(info.configs),
                    read_only=self.read_only,
                    remote=self.remote,
                )
                self._logs[(topic, partition)] = log
                self._log_topic_ids[(topic, partition)] = info.topic_id
            return log

    def close(self) -> None:
        """Close every opened log and release the lock (idempotent)."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            logs, self._logs = list(self._logs.values()), {}
        for log in logs:
            with contextlib.suppress(Exception):
                log.close()
        if self._lock_fd is not None:
            fcntl.flock(self._lock_fd, fcntl.LOCK_UN)
            os.close(self._lock_fd)
            self._lock_fd = None

    def __enter__(self) -> DataDir:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
