"""Fixtures: a real ``seglog serve`` subprocess on a free loopback port."""

from __future__ import annotations

import itertools
import re
import signal
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path

import pytest

from seglog.broker import BrokerProcess, start_broker

_names = itertools.count()


@pytest.fixture(scope="module")
def broker_process(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[BrokerProcess]:
    """One broker per test module (tests use their own topics); stopped with SIGTERM,
    which must exit 0. A module may set ``BROKER_ARGS`` (extra ``seglog serve`` flags)."""
    data = tmp_path_factory.mktemp("broker") / "data"
    proc = start_broker(data, extra_args=getattr(request.module, "BROKER_ARGS", ()))
    try:
        yield proc
    finally:
        code = proc.stop(signal.SIGTERM)
        log = proc.log_text()
        assert code == 0, log
        assert "Traceback" not in log, log
        assert " ERROR " not in log, log
        proc.log_path.unlink()


@pytest.fixture
def broker(broker_process: BrokerProcess) -> str:
    """The bootstrap address ``127.0.0.1:PORT`` of the module's broker."""
    assert broker_process.process.poll() is None, broker_process.log_text()
    return broker_process.bootstrap


@pytest.fixture
def data_dir(broker_process: BrokerProcess) -> Path:
    """The module broker's data directory."""
    return broker_process.data_dir


@pytest.fixture
def broker_factory(tmp_path: Path) -> Iterator[Callable[..., BrokerProcess]]:
    """Start brokers on ``tmp_path / "data"`` (restart tests); all stopped at teardown."""
    started: list[BrokerProcess] = []

    def start(extra_args: Sequence[str] = (), data: Path | None = None) -> BrokerProcess:
        proc = start_broker(data or tmp_path / "data", extra_args=extra_args)
        started.append(proc)
        return proc

    yield start
    for proc in started:
        assert proc.stop() == 0, proc.log_text()
        assert " ERROR " not in proc.log_text(), proc.log_text()
        proc.log_path.unlink()


@pytest.fixture
def topic(request: pytest.FixtureRequest) -> str:
    """A topic name unique to the test."""
    base = re.sub(r"[^a-zA-Z0-9._-]", "_", request.node.name)
    return f"t.{next(_names)}.{base}"[:200]
