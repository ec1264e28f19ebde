"""Operator mistakes: one ``error:`` line on stderr, the right exit code, no traceback."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from .conftest import SEGLOG, Seglog


def _run(*args: str) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(
        [*SEGLOG, *args], input=b"x\n", capture_output=True, timeout=120, check=False
    )


@pytest.mark.parametrize(
    "args",
    [
        ("produce", "t", "-X", "no.such.property=1"),
        ("produce", "t", "-z", "bogus"),
        ("consume", "t", "-e", "-X", "no.such.property=1"),
        ("acl", "list", "-X", "no.such.property=1"),
    ],
)
def test_bad_client_config_is_one_error_line(args: tuple[str, ...]) -> None:
    done = _run(*args, "-b", "127.0.0.1:1")
    assert done.returncode == 1, done.stderr
    assert b"Traceback" not in done.stderr
    assert done.stderr.startswith(b"error:"), done.stderr


@pytest.mark.parametrize("command", ["check", "recover", "stat", "migrate"])
def test_storage_error_goes_to_stderr(tmp_path: Path, command: str) -> None:
    done = _run(command, str(tmp_path / "missing"))
    assert done.returncode == 2
    assert b"error:" in done.stderr
    assert done.stdout == b""


def test_offset_past_the_end_prints_nothing(seglog: Seglog, topic: str) -> None:
    """Kafka's console consumer and kcat reset an out-of-range -o N to the end, never
    to the beginning: records before N are not what was asked for."""
    seglog("topic", "create", topic)
    seglog("produce", topic, stdin=b"a\nb\nc\n")
    assert seglog("consume", topic, "-o", "1", "-e").stdout == b"b\nc\n"
    assert seglog("consume", topic, "-o", "100", "-e").stdout == b""
