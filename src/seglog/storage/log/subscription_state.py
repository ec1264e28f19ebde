"""The state file of a durable subscription (``subscription.py``): its journal lines, how
a journal is read back, and the read-only uses of it (``floor`` for retention,
``backup_states`` for backups).

``<partition>/subscriptions/<name>.sub`` is an append-only journal of text lines ``<crc32
as 8 hex digits> <json>\\n``: a snapshot line first (version 2: ``{"v": 2, "name",
"position", "runs": [[first, last, redelivery count], ...]}``), then change lines, each a
list of inclusive offset ranges: ``{"D": [[first, last], ...], "p": position}`` (new
deliveries, count 0, position moved), ``{"R": [...]}`` (redeliveries, count + 1),
``{"A": [...]}`` (acks). Version 1 journals (a snapshot with ``"pending": [[offset,
count], ...]``, lines ``"d"``, ``"r"``, ``"a"`` listing offsets) are read too. Reading
stops at the first line that is incomplete or fails its CRC (a torn append).
"""

from __future__ import annotations

import contextlib
import json
import os
import pathlib
import re
import zlib
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from seglog.errors import LogCorruptedError

if TYPE_CHECKING:
    from seglog.storage.log.log import Log

__all__ = [
    "NAME",
    "SUBSCRIPTIONS_DIR",
    "SUFFIX",
    "backup_states",
    "count_runs",
    "floor",
    "line",
    "load",
    "parse",
    "snapshot",
    "validate_subscription_name",
]

SUBSCRIPTIONS_DIR = "subscriptions"
"""Subdirectory of the partition directory holding one ``<name>.sub`` per subscription."""
SUFFIX = ".sub"
"""A state file's suffix."""
NAME = re.compile(r"[A-Za-z0-9._-]{1,200}")
"""Valid subscription names (fullmatch; ``.`` and ``..`` refused besides)."""


def validate_subscription_name(name: str) -> None:
    """ValueError unless ``name`` matches ``[A-Za-z0-9._-]{1,200}`` (a file name inside
    the subscriptions directory, never a path outside it)."""
    if not isinstance(name, str) or NAME.fullmatch(name) is None or name in (".", ".."):
        raise ValueError(f"invalid subscription name {name!r}: use [A-Za-z0-9._-]{{1,200}}")


def line(record: dict[str, Any]) -> bytes:
    """One journal line: ``<crc32 as 8 hex digits> <json>\\n``."""
    body = json.dumps(record, separators=(",", ":")).encode()
    return b"%08x %s\n" % (zlib.crc32(body), body)


def snapshot(name: str, position: int, runs: Iterable[tuple[int, int, int]]) -> bytes:
    """A snapshot line (version 2): ``{"v": 2, "name", "position", "runs": [[first,
    last, redelivery count], ...]}``."""
    doc = {"v": 2, "name": name, "position": position, "runs": [list(r) for r in runs]}
    return line(doc)


def count_runs(pending: dict[int, int]) -> list[tuple[int, int, int]]:
    """``offset -> redelivery count`` as runs ``(first, last, count)`` of consecutive
    offsets with one count, ascending."""
    out: list[tuple[int, int, int]] = []
    for o in sorted(pending):
        c = pending[o]
        if out and out[-1][1] == o - 1 and out[-1][2] == c:
            out[-1] = (out[-1][0], o, c)
        else:
            out.append((o, o, c))
    return out


def parse(data: bytes) -> tuple[list[dict[str, Any]], int]:
    """The valid records of a journal and the byte length of that valid prefix."""
    records: list[dict[str, Any]] = []
    pos = 0
    while pos < len(data):
        end = data.find(b"\n", pos)
        if end < 0:
            break
        line = data[pos:end]
        if len(line) < 10 or line[8:9] != b" ":
            break
        body = line[9:]
        try:
            if int(line[:8], 16) != zlib.crc32(body):
                break
            record = json.loads(body)
        except ValueError:
            break
        if not isinstance(record, dict):
            break
        records.append(record)
        pos = end + 1
    return records, pos


def load(path: pathlib.Path) -> tuple[int, dict[int, int]] | None:
    """(position, pending offset -> redelivery count) replayed from a journal; None when
    the file is missing. LogCorruptedError when its first line (a snapshot, written
    whole by the atomic writer) is unreadable: never a silent restart from scratch."""
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return None
    records, _ = parse(data)
    if not records or records[0].get("v") not in (1, 2) or "position" not in records[0]:
        raise LogCorruptedError(
            f"subscription state {path} is damaged (no valid snapshot line): "
            "remove it with Log.unsubscribe to start over"
        )
    snap = records[0]
    position = int(snap["position"])
    if snap["v"] == 1:
        pending = {int(o): int(c) for o, c in snap["pending"]}
    else:
        pending = {o: int(c) for f, to, c in snap["runs"] for o in range(int(f), int(to) + 1)}
    for rec in records[1:]:
        if "d" in rec or "D" in rec:
            for o in _offsets_of(rec, "d"):
                pending[o] = 0
            position = int(rec["p"])
        elif "r" in rec or "R" in rec:
            for o in _offsets_of(rec, "r"):
                if o in pending:
                    pending[o] += 1
        elif "a" in rec or "A" in rec:
            for o in _offsets_of(rec, "a"):
                pending.pop(o, None)
    return position, pending


def _offsets_of(rec: dict[str, Any], kind: str) -> Iterable[int]:
    """The offsets of a journal change line: ``kind`` (``"d"``, ``"r"``, ``"a"``) lists
    offsets (version 1 lines), its upper case lists ``[first, last]`` ranges."""
    if kind in rec:
        return [int(o) for o in rec[kind]]
    return (o for f, to in rec[kind.upper()] for o in range(int(f), int(to) + 1))


def floor(log: Log, name: str) -> int | None:
    """The lowest offset subscription ``name`` of ``log`` still needs (its lowest
    unacknowledged offset, else its position), at least the log start offset; None when
    it has no state file (never subscribed). Read-only: reads the journal, opens or
    changes nothing (a live subscription writes every change to its journal before
    returning, and a torn last line only reads as an older, lower state). Raises
    ValueError (bad name), LogCorruptedError (damaged state file)."""
    validate_subscription_name(name)
    loaded = load(log.directory / SUBSCRIPTIONS_DIR / (name + SUFFIX))
    if loaded is None:
        return None
    position, pending = loaded
    start = log.log_start_offset  # pending offsets below it are gone (the subscription drops them)
    return max(start, min([position, *(o for o in pending if o >= start)]))


def backup_states(directory: pathlib.Path, end: int) -> list[tuple[str, bytes]]:
    """The subscription state files of the partition ``directory`` as a backup of its
    prefix ending at offset ``end`` holds them: ``(file name, bytes)`` sorted by name,
    each journal replayed into one snapshot line (what ``close`` writes) whose position
    is at most ``end`` and whose unacknowledged offsets are below ``end`` (deliveries past
    the copied prefix are not in the copy, so neither is their state). A file that cannot
    be replayed (damaged snapshot line) is copied as it is: the copy's ``subscribe``
    raises LogCorruptedError as the source's does. A file removed meanwhile
    (``unsubscribe``) is left out. OSError on other read errors."""
    try:
        entries = sorted(os.listdir(directory / SUBSCRIPTIONS_DIR))
    except FileNotFoundError:
        return []
    out: list[tuple[str, bytes]] = []
    for entry in entries:
        name = entry[: -len(SUFFIX)]
        if not entry.endswith(SUFFIX) or not NAME.fullmatch(name) or name in (".", ".."):
            continue
        path = directory / SUBSCRIPTIONS_DIR / entry
        try:
            loaded = load(path)
        except LogCorruptedError:
            with contextlib.suppress(FileNotFoundError):
                out.append((entry, path.read_bytes()))
            continue
        if loaded is None:
            continue
        position, pending = loaded
        runs = count_runs({o: c for o, c in pending.items() if o < end})
        out.append((entry, snapshot(name, min(position, end), runs)))
    return out
