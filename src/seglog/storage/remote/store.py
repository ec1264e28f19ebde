"""The object store adapter: ``file:///dir`` and ``s3://bucket/prefix`` behind five calls.

Library: **obstore** (the Python binding of Rust's ``object_store`` crate, the one that
Apache Arrow DataFusion, Delta-rs and others ship). Chosen over fsspec/s3fs because:

- its calls are synchronous (``obstore.put/get/get_range/list/delete``) with no event loop
  of ours: storage must not import asyncio (s3fs is built on aiobotocore and runs its
  own asyncio loop thread behind a sync facade);
- one API for S3 (and GCS/Azure) and a local directory (``LocalStore``), so the
  ``file://`` tier used by tests and single-machine deployments runs the same code path;
- ``put`` is atomic (an object appears whole or not at all) and switches to a multipart
  upload above ``chunk_size`` by itself, with ranged reads (``get_range``) and retries
  with backoff built in; credentials come from the environment (``AWS_ACCESS_KEY_ID``,
  ``AWS_SECRET_ACCESS_KEY``, ``AWS_REGION``, ...) as every AWS SDK does.

Errors: every failure of the store is raised as :class:`RemoteStorageError` (a
StorageError), a missing object as :class:`RemoteObjectNotFoundError` (its subclass).
"""

from __future__ import annotations

import contextlib
import os
import re
import threading
import urllib.parse
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import timedelta
from typing import Any, BinaryIO

import crc32c
import obstore
from obstore.store import from_url

from seglog.errors import RemoteStorageError

__all__ = [
    "ObjectStore",
    "RemoteObjectNotFoundError",
    "RemoteStorage",
    "RemoteStorageError",
]

DEFAULT_CACHE_BYTES = 1 << 30
"""``seglog.remote.cache.bytes`` default: 1 GiB of remote segments cached on local disk."""


class RemoteObjectNotFoundError(RemoteStorageError):
    """An object the manifest names is missing from the remote store."""


@dataclass(frozen=True)
class RemoteStorage:
    """Where tiered segments go (the broker's ``seglog.remote.*`` settings).

    ``url``: ``file:///absolute/dir`` or ``s3://bucket[/prefix]``; ``endpoint_url``: an
    S3-compatible endpoint (``http://127.0.0.1:9000``; plain http allowed), None for AWS;
    credentials and region from the environment (``AWS_ACCESS_KEY_ID`` ...; region
    ``us-east-1`` when unset). ``cache_bytes``: bound of the local cache of remote
    segments (``seglog.remote.cache.bytes``), ``cache_dir``: where it lives (None: a
    ``seglog-remote-cache`` directory under the system temporary directory)."""

    url: str
    endpoint_url: str | None = None
    cache_bytes: int = DEFAULT_CACHE_BYTES
    cache_dir: str | None = None

    def __post_init__(self) -> None:
        scheme = urllib.parse.urlsplit(self.url).scheme
        if scheme not in ("file", "s3"):
            raise ValueError(f"remote storage url {self.url!r}: file:///dir or s3://bucket/prefix")
        if self.cache_bytes < 0:
            raise ValueError("seglog.remote.cache.bytes must be >= 0")


_STAGING = re.compile(r"#\d+$")

_stores: dict[tuple[str, str | None], ObjectStore] = {}
_stores_guard = threading.Lock()


class ObjectStore:
    """A remote store rooted at a URL; keys are ``/``-separated paths under it.
    Thread-safe (obstore clients are). Use :meth:`for_settings` to share one per URL."""

    def __init__(self, url: str, endpoint_url: str | None = None) -> None:
        self.url = url
        self.endpoint_url = endpoint_url
        parts = urllib.parse.urlsplit(url)
        self._store: Any
        self._root: str | None = None
        if parts.scheme == "file":
            root = self._root = urllib.parse.unquote(parts.path)
            os.makedirs(root, exist_ok=True)
            self._store = from_url(f"file://{root}", mkdir=True)
        else:
            kwargs: dict[str, Any] = {
                "region": os.environ.get("AWS_REGION")
                or os.environ.get("AWS_DEFAULT_REGION")
                or "us-east-1",
            }
            if endpoint_url:
                kwargs["endpoint"] = endpoint_url
                kwargs["virtual_hosted_style_request"] = False
            build: Any = from_url  # S3Config keywords built at run time
            self._store = build(
                url,
                client_options={"allow_http": True, "timeout": "30s", "connect_timeout": "5s"},
                retry_config={
                    "max_retries": 2,
                    "backoff": {
                        "init_backoff": timedelta(milliseconds=50),
                        "max_backoff": timedelta(seconds=1),
                        "base": 2,
                    },
                    "retry_timeout": timedelta(seconds=5),
                },
                **kwargs,
            )

    @classmethod
    def for_settings(cls, settings: RemoteStorage) -> ObjectStore:
        """The process's one client for ``settings.url`` / ``endpoint_url``."""
        key = (settings.url, settings.endpoint_url)
        with _stores_guard:
            store = _stores.get(key)
            if store is None:
                store = _stores[key] = cls(settings.url, settings.endpoint_url)
            return store

    def put(self, key: str, data: bytes | memoryview) -> None:
        """Write ``data`` at ``key``, atomically (whole or nothing; multipart above 8 MiB)."""
        try:
            obstore.put(self._store, key, data, chunk_size=8 << 20)
        except Exception as e:
            raise RemoteStorageError(f"put {key} to {self.url}: {e}") from e

    def put_stream(self, key: str, f: BinaryIO) -> None:
        """Write the rest of file ``f`` at ``key`` as a multipart upload (8 MiB parts,
        uploaded concurrently), atomically."""
        try:
            obstore.put(self._store, key, f, chunk_size=8 << 20, max_concurrency=8)
        except Exception as e:
            raise RemoteStorageError(f"put {key} to {self.url}: {e}") from e

    def get(self, key: str) -> bytes:
        """The whole object at ``key``; RemoteObjectNotFoundError, RemoteStorageError."""
        try:
            return bytes(obstore.get(self._store, key).bytes())
        except FileNotFoundError as e:
            raise RemoteObjectNotFoundError(f"{self.url}: no object {key}") from e
        except Exception as e:
            raise RemoteStorageError(f"get {key} from {self.url}: {e}") from e

    def get_to_file(self, key: str, path: str | os.PathLike[str]) -> tuple[int, int]:
        """Stream the object at ``key`` into a new file ``path`` (8 MiB chunks: memory
        stays bounded whatever the segment size); returns ``(bytes, CRC-32C)``.
        RemoteObjectNotFoundError, RemoteStorageError; OSError from the local file (ENOSPC)."""
        try:
            chunks = iter(obstore.get(self._store, key).stream(min_chunk_size=8 << 20))
        except FileNotFoundError as e:
            raise RemoteObjectNotFoundError(f"{self.url}: no object {key}") from e
        except Exception as e:
            raise RemoteStorageError(f"get {key} from {self.url}: {e}") from e
        size = crc = 0
        with open(path, "wb") as f:
            while True:
                try:
                    chunk = next(chunks, None)
                except Exception as e:
                    raise RemoteStorageError(f"get {key} from {self.url}: {e}") from e
                if chunk is None:
                    return size, crc
                crc = crc32c.crc32c(chunk, crc)
                size += len(chunk)
                f.write(chunk)

    def get_range(self, key: str, start: int, end: int) -> bytes:
        """Bytes ``[start, end)`` of the object at ``key`` (a ranged GET)."""
        try:
            return bytes(obstore.get_range(self._store, key, start=start, end=end))
        except FileNotFoundError as e:
            raise RemoteObjectNotFoundError(f"{self.url}: no object {key}") from e
        except Exception as e:
            raise RemoteStorageError(f"get {key}[{start}:{end}] from {self.url}: {e}") from e

    def list_objects(self, prefix: str) -> Iterator[tuple[str, int]]:
        """``(key, size)`` of every object under ``prefix``."""
        try:
            for chunk in obstore.list(self._store, prefix):
                for meta in chunk:
                    yield meta["path"], meta["size"]
        except Exception as e:
            raise RemoteStorageError(f"list {prefix} in {self.url}: {e}") from e

    def sweep_partial(self, prefix: str) -> int:
        """Remove the staging files of puts a crash interrupted under ``prefix`` (a
        ``file://`` store writes ``<key>#<n>`` and renames it; they are not listed as
        objects). Returns how many. S3 keeps an interrupted multipart upload invisible
        (abort it with a bucket lifecycle rule); nothing to do there."""
        if self._root is None:
            return 0
        removed = 0
        for dirpath, _dirs, names in os.walk(os.path.join(self._root, prefix)):
            for name in names:
                if _STAGING.search(name):
                    with contextlib.suppress(FileNotFoundError):
                        os.unlink(os.path.join(dirpath, name))
                        removed += 1
        return removed

    def delete(self, keys: list[str]) -> None:
        """Remove ``keys`` (missing ones are not an error)."""
        if not keys:
            return
        try:
            obstore.delete(self._store, keys)
        except FileNotFoundError:
            for key in keys:
                with contextlib.suppress(FileNotFoundError):
                    obstore.delete(self._store, key)
        except Exception as e:
            raise RemoteStorageError(f"delete {len(keys)} object(s) in {self.url}: {e}") from e
