"""Logs to back up, and what a backup or restore holds (storage and CLI backup tests)."""

from __future__ import annotations

from pathlib import Path

from seglog import Message, open_log

__all__ = ["files", "make", "values"]


def files(root: Path) -> dict[str, bytes]:
    return {
        str(p.relative_to(root)): p.read_bytes()
        for p in sorted(root.rglob("*"))
        if p.is_file() and p.name != ".clean_shutdown"
    }


def values(path: Path) -> list[bytes | None]:
    with open_log(path, read_only=True) as log:
        return [m.value for m in log.consume(0, 1 << 20)[1]]


def make(path: Path, n: int = 60, **config) -> None:
    with open_log(path, create=True, segment_bytes=1000, key_index=True, **config) as log:
        for i in range(0, n, 5):
            log.publish(
                [Message(key=b"k%d" % (j % 4), value=b"v%03d" % j) for j in range(i, i + 5)]
            )
