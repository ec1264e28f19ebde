"""Crash-safety suite: every test records the figures it measured; they are printed in
pytest's terminal summary ("seglog crash figures") and as each test runs with ``-s``."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

import seglog.storage  # noqa: F401  (imports kafka-python quietly, see storage/_message.py)

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
