"""Fixtures: one real ``seglog serve`` per module, and a runner for ``seglog`` commands
as separate processes (as a user runs them)."""

from __future__ import annotations

import itertools
import json
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from seglog.broker import BrokerProcess, start_broker

_names = itertools.count()
SEGLOG = [str(Path(sys.executable).with_name("seglog"))]


@pytest.fixture(scope="module")
def broker_process(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    """One broker per module; SIGTERM must exit 0 with no error logged."""
    proc = start_broker(tmp_path_factory.mktemp("broker") / "data")
    try:
        yield proc
    finally:
        code = proc.stop(signal.SIGTERM)
        log = proc.log_text()
        assert code == 0, log
        assert "Traceback" not in log, log
        proc.log_path.unlink()


@pytest.fixture
def broker(broker_process: BrokerProcess) -> str:
    """``127.0.0.1:PORT`` of the module's broker."""
    assert broker_process.process.poll() is None, broker_process.log_text()
    return broker_process.bootstrap


@pytest.fixture
def topic(request: pytest.FixtureRequest) -> str:
    """A topic name unique to the test."""
    return f"cli.{next(_names)}.{request.node.name}"[:200].replace("[", "_").replace("]", "_")


class Seglog:
    """Run ``seglog ARGS -b BROKER`` as a process; stdin bytes in, result out."""

    def __init__(self, broker: str) -> None:
        self.broker = broker

    def __call__(
        self, *args: str, stdin: bytes = b"", check: bool = True, timeout: float = 60
    ) -> subprocess.CompletedProcess[bytes]:
        cmd = [*SEGLOG, *args, "-b", self.broker]
        done = subprocess.run(cmd, input=stdin, capture_output=True, timeout=timeout, check=False)
        if check and done.returncode != 0:
            raise AssertionError(f"{cmd} exit {done.returncode}: {done.stderr.decode()}")
        return done

    def json(self, *args: str) -> Any:
        """The command's ``--json`` output parsed (one document)."""
        return json.loads(self(*args, "--json").stdout)

    def json_lines(self, *args: str, stdin: bytes = b"") -> list[Any]:
        """The command's ``--json`` output parsed line by line."""
        out = self(*args, "--json", stdin=stdin).stdout.decode()
        return [json.loads(line) for line in out.splitlines() if line]


@pytest.fixture
def seglog(broker: str) -> Seglog:
    """Runner of ``seglog`` commands against the module's broker."""
    return Seglog(broker)
