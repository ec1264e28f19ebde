"""Crash-safety suite: every test records the figures it measured; they are printed in
pytest's terminal summary ("seglog crash figures") and as each test runs with ``-s``."""

from __future__ import annotations

import os
import pathlib
import shutil
import tempfile
from collections.abc import Iterator

import pytest

import seglog.storage  # noqa: F401  (imports kafka-python quietly, see storage/record/message.py)

from ._harness import Zygote

FIGURES: list[str] = []


def record_figure(line: str) -> None:
    """Print ``line`` and keep it for the terminal summary."""
    FIGURES.append(line)
    print(line)


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    if FIGURES:
        terminalreporter.section("seglog crash figures")
        for line in FIGURES:
            terminalreporter.write_line(line)


@pytest.fixture
def zygote() -> Iterator[Zygote]:
    z = Zygote()
    try:
        yield z
    finally:
        z.close()


@pytest.fixture
def shm_path(tmp_path: pathlib.Path) -> Iterator[pathlib.Path]:
    """A temporary directory in /dev/shm (tmpfs: fsync is free, so tests that reopen a
    log thousands of times stay fast); ``tmp_path`` where there is no /dev/shm."""
    if not os.path.isdir("/dev/shm"):
        yield tmp_path
        return
    d = pathlib.Path(tempfile.mkdtemp(prefix="seglog-crash-", dir="/dev/shm"))
    try:
        yield d
    finally:
        shutil.rmtree(d, ignore_errors=True)
