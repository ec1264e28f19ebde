"""Deleting a partition's remote objects when its topic is deleted (Kafka's
RemoteLogManager on ``stopPartitions(delete=true)``): every object under the
partition's key prefix — segments, their indexes, then the manifest last, so that an
interrupted purge leaves a manifest whose objects the next purge (or a writer's orphan
sweep) finds again — and the partition's segments in the local cache.

The prefix holds the topic id (``partition_key``), so a topic created again under the
same name never meets these objects even while a purge is still pending.
"""

from __future__ import annotations

from typing import NamedTuple

from seglog.storage.remote.cache import RemoteCache
from seglog.storage.remote.manifest import MANIFEST_KEY
from seglog.storage.remote.store import ObjectStore, RemoteStorage

__all__ = ["RemotePartition", "purge_partition"]


class RemotePartition(NamedTuple):
    """A deleted partition's objects: the store and the key prefix (``<topic>-<n>-<id>``)."""

    settings: RemoteStorage
    """The store the partition was tiered to (its manifest's, else the broker's)."""
    prefix: str
    """The partition's key prefix, without the trailing ``/``."""


def purge_partition(part: RemotePartition) -> int:
    """Delete every object under ``part.prefix + "/"`` (the manifest last) and drop the
    partition's cached segments. Returns the objects deleted (0 when none: idempotent).
    Raises RemoteStorageError when the store cannot be listed or deleted from."""
    store = ObjectStore.for_settings(part.settings)
    manifest = f"{part.prefix}/{MANIFEST_KEY}"
    keys = [key for key, _size in store.list_objects(f"{part.prefix}/")]
    store.delete(sorted(k for k in keys if k != manifest))
    store.sweep_partial(f"{part.prefix}/")
    if manifest in keys:
        store.delete([manifest])
    settings = part.settings
    RemoteCache.shared(settings.cache_dir, settings.cache_bytes).drop_partition(part.prefix)
    return len(keys)
