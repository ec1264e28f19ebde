"""Crash-safe removal and replacement of segment files (Kafka's ``.deleted`` / ``.cleaned``
/ ``.swap`` renames), and the loader's rules for finishing what a crash interrupted.

Removal of segment ``B`` (retention): rename ``B.timeindex``, ``B.index`` then ``B.log``
to ``.deleted`` (the ``.log`` rename is the point of no return), fsync the directory,
unlink. With an archive hook the files are renamed to ``.bak`` instead and handed over.

Replacement of segment ``B`` by a rewritten copy (cleaner, delete by offsets)::

    1. write B.log.cleaned, B.index.cleaned, B.timeindex.cleaned (B.txnindex.cleaned
       when it keeps ABORT markers); fsync them and the dir
    2. rename B.log.cleaned -> B.log.swap; fsync the dir            (the commit point)
    3. rename B.log.swap -> B.log (atomic replace); fsync the dir
    4. rename B.index.cleaned -> B.index, B.timeindex.cleaned -> B.timeindex,
       B.txnindex.cleaned -> B.txnindex (or unlink B.txnindex); fsync the dir

Loader rules (:func:`finish_interrupted`, run by writers before any segment is opened):
``*.deleted`` files are unlinked; ``B.log.cleaned`` present means the rewrite never
committed: every ``B.*.cleaned`` is unlinked (old state); ``B.log.swap`` present means it
committed: it replaces ``B.log`` (new state); in the committed cases (a ``.swap``, or index
``.cleaned`` files left without their ``.log.cleaned``) ``B``'s live index files are
unlinked so they are rebuilt from the new data. ``.bak`` files belong to the archive hook
and are never touched. A crash at any step thus leaves either the old or the new segment.
"""

from __future__ import annotations

import contextlib
import contextvars
import os
import pathlib
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING

from seglog.storage.fileio import files

if TYPE_CHECKING:
    from seglog.storage.fileio.counters import FileCounters

__all__ = [
    "Step",
    "cleaned_path",
    "commit_rewrite",
    "finish_interrupted",
    "remove_segment_files",
    "segment_paths",
]

Step = Callable[[str], None]
"""Test hook: called with a step name after each durable step of an operation; raising
from it stops the operation there (simulates a crash at that point)."""

_CLEANED = files.CLEANED_SUFFIX
_SWAP = files.SWAP_SUFFIX
_DELETED = files.DELETED_SUFFIX


_STEP_HOOK: contextvars.ContextVar[Step | None] = contextvars.ContextVar(
    "seglog_storage_step_hook", default=None
)


def step(name: str) -> None:
    """Report the file-changing step ``name`` (e.g. "renamed", "swap", "checkpoint") to
    the hook installed by :func:`stepping`, if any."""
    hook = _STEP_HOOK.get()
    if hook is not None:
        hook(name)


@contextlib.contextmanager
def stepping(hook: Step) -> Iterator[None]:
    """Call ``hook(step name)`` at each file-changing step of the trims, compactions and
    deletes run in this context (crash tests raise from it to stop at a step). Not in any
    public signature: the operations take no test hook."""
    token = _STEP_HOOK.set(hook)
    try:
        yield
    finally:
        _STEP_HOOK.reset(token)


def segment_paths(directory: pathlib.Path, base: int) -> list[pathlib.Path]:
    """``[B.txnindex, B.timeindex, B.index, B.log]``: the order files are renamed in
    (``.log`` last)."""
    return [
        files.txnindex_path(directory, base),
        files.timeindex_path(directory, base),
        files.index_path(directory, base),
        files.log_path(directory, base),
    ]


def cleaned_path(live: pathlib.Path) -> pathlib.Path:
    """``<live>.cleaned``: where a rewritten copy of ``live`` is written first."""
    return live.with_name(live.name + _CLEANED)


def remove_segment_files(
    directory: pathlib.Path,
    base: int,
    *,
    archive: bool = False,
    counters: FileCounters | None = None,
) -> list[pathlib.Path]:
    """Rename segment ``base``'s files to ``.deleted`` (or ``.bak`` when ``archive``),
    ``.log`` last, fsync the directory, then unlink the ``.deleted`` ones. Returns the
    ``.bak`` paths (empty unless ``archive``). Missing index files are skipped. Steps:
    "renamed", "unlinked". ``counters``: the log's, counting renames and deletions."""
    suffix = files.BAK_SUFFIX if archive else _DELETED
    moved: list[pathlib.Path] = []
    for live in segment_paths(directory, base):
        target = live.with_name(live.name + suffix)
        try:
            os.replace(live, target)
        except FileNotFoundError:
            continue
        moved.append(target)
    if counters is not None:
        counters.renames += len(moved)
    files.fsync_dir(directory)
    step("renamed")
    if archive:
        return moved
    unlinked = sum(files.remove_if_exists(path) for path in moved)
    if counters is not None:
        counters.deletions += unlinked
    step("unlinked")
    return []


def commit_rewrite(
    directory: pathlib.Path,
    base: int,
    counters: FileCounters | None = None,
) -> None:
    """Steps 2-4 of the module's replacement procedure, once the three ``.cleaned`` files
    of segment ``base`` are written and fsynced. Steps: "swap", "log-live", "indexes-live".
    ``counters``: the log's, counting the four renames."""
    log = files.log_path(directory, base)
    swap = log.with_name(log.name + _SWAP)
    os.replace(cleaned_path(log), swap)
    files.fsync_dir(directory)
    step("swap")
    os.replace(swap, log)
    files.fsync_dir(directory)
    step("log-live")
    for live in (files.index_path(directory, base), files.timeindex_path(directory, base)):
        os.replace(cleaned_path(live), live)
    txn = files.txnindex_path(directory, base)
    try:  # written only when the rewritten segment keeps ABORT markers
        os.replace(cleaned_path(txn), txn)
    except FileNotFoundError:
        files.remove_if_exists(txn)
    if counters is not None:
        counters.renames += 4
    files.fsync_dir(directory)
    step("indexes-live")


def _base_of(name: str) -> int | None:
    stem = name.partition(".")[0]
    return int(stem) if len(stem) == 20 and stem.isdigit() else None


def finish_interrupted(directory: pathlib.Path) -> list[str]:
    """Apply the loader rules of the module docstring to ``directory``; returns a line per
    action taken (for logs and reports). Writers only."""
    actions: list[str] = []
    names = os.listdir(directory)
    touched: dict[int, set[str]] = {}
    for name in names:
        base = _base_of(name)
        if base is None:
            continue
        if name.endswith(_DELETED):
            files.remove_if_exists(directory / name)
            actions.append(f"removed leftover {name}")
        elif name.endswith((_CLEANED, _SWAP)):
            touched.setdefault(base, set()).add(name)
    for base, found in sorted(touched.items()):
        log = files.log_path(directory, base)
        log_cleaned = log.name + _CLEANED
        log_swap = log.name + _SWAP
        committed = log_cleaned not in found
        if log_swap in found:
            os.replace(directory / log_swap, log)
            actions.append(f"finished the swap of {log.name}")
        for name in found - {log_swap}:
            files.remove_if_exists(directory / name)
        if committed:
            for live in (
                files.index_path(directory, base),
                files.timeindex_path(directory, base),
                files.txnindex_path(directory, base),
            ):
                files.remove_if_exists(live)
            actions.append(f"segment {base:020d}: indexes to rebuild after an interrupted swap")
        else:
            actions.append(f"segment {base:020d}: dropped an uncommitted rewrite")
    if actions:
        files.fsync_dir(directory)
    return actions
