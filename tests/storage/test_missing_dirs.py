"""A missing directory or file is DirectoryNotFoundError (a FileNotFoundError too), never
the NotFoundError of a missing record, key or offset."""

from __future__ import annotations

import pathlib
from collections.abc import Callable
from typing import Any

import pytest

from seglog.errors import DirectoryNotFoundError, NotFoundError, StorageError
from seglog.storage import (
    DataDir,
    Log,
    backup,
    check,
    log_directories,
    migrate,
    open_log,
    recover,
    restore,
    snapshot,
    stat,
)

OPS: dict[str, Callable[[pathlib.Path], Any]] = {
    "open_log": open_log,
    "Log.open read_only": lambda p: Log.open(p, read_only=True, create=True),
    "DataDir": lambda p: DataDir(p, create=False),
    "check": check,
    "recover": recover,
    "stat": stat,
    "migrate": migrate,
    "log_directories": log_directories,
    "backup": lambda p: backup(p, p.parent / "copy"),
    "snapshot": lambda p: snapshot(p, p.parent / "s.tar"),
}


@pytest.mark.parametrize("op", sorted(OPS))
def test_missing_directory(tmp_path: pathlib.Path, op: str) -> None:
    missing = tmp_path / "missing"
    with pytest.raises(DirectoryNotFoundError) as info:
        OPS[op](missing)
    assert isinstance(info.value, FileNotFoundError)
    assert isinstance(info.value, StorageError)
    assert not isinstance(info.value, NotFoundError)
    assert not (tmp_path / "copy").exists()
    assert not (tmp_path / "s.tar").exists()


@pytest.mark.parametrize("op", ["check", "recover", "stat", "migrate", "backup", "snapshot"])
def test_directory_without_a_log(tmp_path: pathlib.Path, op: str) -> None:
    empty = tmp_path / "empty"
    (empty / "sub").mkdir(parents=True)
    with pytest.raises(DirectoryNotFoundError):
        OPS[op](empty)


def test_except_not_found_error_no_longer_catches_a_missing_directory(
    tmp_path: pathlib.Path,
) -> None:
    caught = None
    try:
        open_log(tmp_path / "missing")
    except NotFoundError:  # meant for a record, key or offset
        pytest.fail("a missing directory is not a missing record")
    except FileNotFoundError as e:  # what a missing directory is
        caught = e
    assert isinstance(caught, DirectoryNotFoundError)


def test_backup_into_a_missing_parent(tmp_path: pathlib.Path) -> None:
    open_log(tmp_path / "p", create=True).close()
    with pytest.raises(DirectoryNotFoundError):
        backup(tmp_path / "p", tmp_path / "no" / "copy")


def test_restore_of_a_missing_snapshot_file(tmp_path: pathlib.Path) -> None:
    with pytest.raises(FileNotFoundError) as info:
        restore(tmp_path / "missing.tar", tmp_path / "dest")
    assert not isinstance(info.value, NotFoundError)
    assert info.value.filename == str(tmp_path / "missing.tar")
    assert not (tmp_path / "dest").exists()
