"""Committed consumer-group offsets (OffsetCommit / OffsetFetch); group membership itself
lives in memory in ``_groups`` (commits are validated there first).

Kept in memory and rewritten atomically to ``<data-dir>/consumer-offsets.json`` on each
commit (group ids are data in the file, never file names).
"""

from __future__ import annotations

import json
import os
from pathlib import Path

__all__ = ["CommittedOffsets"]


class CommittedOffsets:
    """group → topic → partition → (committed offset, metadata)."""

    def __init__(self, data_dir: Path) -> None:
        self._path = data_dir / "consumer-offsets.json"
        self._groups: dict[str, dict[str, dict[int, tuple[int, str | None]]]] = {}
        if self._path.exists():
            raw = json.loads(self._path.read_text())
            for group, topics in raw.items():
                self._groups[group] = {
                    t: {int(p): (int(v[0]), v[1]) for p, v in parts.items()}
                    for t, parts in topics.items()
                }

    def get(self, group: str, topic: str, partition: int) -> tuple[int, str | None] | None:
        """(committed offset, metadata) or None when nothing is committed."""
        return self._groups.get(group, {}).get(topic, {}).get(partition)

    def partitions(self, group: str) -> dict[str, dict[int, tuple[int, str | None]]]:
        """Every committed offset of ``group``."""
        return self._groups.get(group, {})

    def groups(self) -> list[str]:
        """Every group with a committed offset."""
        return [g for g, topics in self._groups.items() if any(topics.values())]

    def commit(self, group: str, offsets: dict[tuple[str, int], tuple[int, str | None]]) -> None:
        """Store offsets and persist the whole table (atomic rename)."""
        topics = self._groups.setdefault(group, {})
        for (topic, partition), value in offsets.items():
            topics.setdefault(topic, {})[partition] = value
        self._save()

    def delete_group(self, group: str) -> bool:
        """Drop every committed offset of ``group`` (DeleteGroups); False if it had none."""
        had = self._groups.pop(group, None) is not None
        if had:
            self._save()
        return had

    def delete_offsets(self, group: str, partitions: list[tuple[str, int]]) -> None:
        """Drop ``group``'s committed offsets of these partitions (OffsetDelete)."""
        topics = self._groups.get(group, {})
        for topic, partition in partitions:
            topics.get(topic, {}).pop(partition, None)
            if topic in topics and not topics[topic]:
                del topics[topic]
        self._save()

    def forget_topic(self, topic: str) -> None:
        """Drop a deleted topic's commits."""
        changed = False
        for topics in self._groups.values():
            changed = topics.pop(topic, None) is not None or changed
        if changed:
            self._save()

    def _save(self) -> None:
        data = {
            g: {t: {str(p): list(v) for p, v in parts.items()} for t, parts in topics.items()}
            for g, topics in self._groups.items()
        }
        tmp = self._path.with_suffix(".json.tmp")
        tmp.write_bytes(json.dumps(data).encode())
        os.replace(tmp, self._path)
