"""The broker's own persisted facts: cluster id, producer-id blocks, the lone voter's quorum
state. Producer ids are handed out in increasing order; the next free id block is persisted
in ``<data-dir>/broker-state.json`` before any id of the block is used, so ids stay unique
across restarts."""

from __future__ import annotations

import base64
import json
import uuid
from pathlib import Path

from seglog.storage import atomic_write

__all__ = ["BrokerState"]

_BLOCK = 1000


class BrokerState:
    """Small broker facts persisted in ``<data-dir>/broker-state.json``: the cluster id,
    the start of the next unallocated producer-id block, and the single-voter quorum's
    state DescribeQuorum reports: ``quorum_epoch`` (one election per broker start, as a
    lone KRaft voter elects itself) and ``metadata_end_offset`` (one metadata record per
    start and per topic change: creation, deletion, partitions, configs). Writes are
    atomic (temp file, fsync, rename, directory fsync)."""

    def __init__(self, data_dir: Path) -> None:
        self._path = data_dir / "broker-state.json"
        state: dict[str, object] = {}
        if self._path.exists():
            state = json.loads(self._path.read_text())
        cluster_id = state.get("cluster_id")
        self.cluster_id = cluster_id if isinstance(cluster_id, str) else _new_cluster_id()
        reserved = state.get("next_producer_id_block", 0)
        self._reserved_end = reserved if isinstance(reserved, int) else 0
        self._next_producer_id = self._reserved_end
        epoch = state.get("quorum_epoch", 0)
        self.quorum_epoch = epoch if isinstance(epoch, int) else 0
        end = state.get("metadata_end_offset", 0)
        self.metadata_end_offset = end if isinstance(end, int) else 0
        if not isinstance(cluster_id, str):
            self._save()

    def begin_epoch(self) -> None:
        """This start's election: the next epoch and its leader-change record."""
        self.quorum_epoch += 1
        self.metadata_end_offset += 1
        self._save()

    def metadata_changed(self) -> None:
        """One more metadata record (a topic was created, deleted, grown or reconfigured)."""
        self.metadata_end_offset += 1
        self._save()

    def next_producer_id(self) -> int:
        """A producer id never handed out before by this data directory."""
        if self._next_producer_id >= self._reserved_end:
            self._reserved_end = self._next_producer_id + _BLOCK
            self._save()
        pid = self._next_producer_id
        self._next_producer_id += 1
        return pid

    def _save(self) -> None:
        data = {
            "cluster_id": self.cluster_id,
            "next_producer_id_block": self._reserved_end,
            "quorum_epoch": self.quorum_epoch,
            "metadata_end_offset": self.metadata_end_offset,
        }
        atomic_write(self._path, json.dumps(data).encode())


def _new_cluster_id() -> str:
    return base64.urlsafe_b64encode(uuid.uuid4().bytes).rstrip(b"=").decode()
