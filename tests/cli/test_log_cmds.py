"""seglog check / recover / stat / migrate (the storage commands of the CLI)."""

from __future__ import annotations

import fcntl
import os
from pathlib import Path

import typer
from typer.testing import CliRunner

from seglog.cli._log_cmds import register
from seglog.storage import (
    DataDir,
    Log,
    LogConfig,
    Message,
    RemoteStorage,
    open_log,
    tier_sync,
)

app = typer.Typer()
register(app)
runner = CliRunner()


def _data_dir(path):
    with DataDir(path) as dd:
        dd.create_topic("orders", 2)
        dd.log("orders", 0).publish([Message(value=b"x" * 100)] * 10)
        dd.log("orders", 1).publish([Message(value=b"y")])


def test_check_stat_recover(tmp_path):
    d = tmp_path / "data"
    _data_dir(d)
    res = runner.invoke(app, ["check", str(d)])
    assert res.exit_code == 0, res.output
    assert "orders-0" in res.output
    assert "ok" in res.output
    res = runner.invoke(app, ["stat", str(d)])
    assert res.exit_code == 0
    assert "orders-1" in res.output
    seg = d / "orders-0" / f"{0:020d}.log"
    data = bytearray(seg.read_bytes())
    data[100] ^= 0xFF
    seg.write_bytes(data)
    res = runner.invoke(app, ["check", str(d)])
    assert res.exit_code == 1
    assert "orders-0" in res.output
    assert seg.read_bytes() == data
    res = runner.invoke(app, ["recover", str(d / "orders-0")])
    assert res.exit_code == 0, res.output
    assert os.path.getsize(seg) == 0
    assert runner.invoke(app, ["check", str(d)]).exit_code == 0


def test_recover_refused_while_writer_holds_lock(tmp_path):
    d = tmp_path / "data"
    _data_dir(d)
    fd = os.open(d / ".lock", os.O_RDWR)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        res = runner.invoke(app, ["recover", str(d)])
        assert res.exit_code == 2
        assert "writer" in res.output
    finally:
        os.close(fd)


def test_check_missing_dir(tmp_path):
    assert runner.invoke(app, ["check", str(tmp_path / "nope")]).exit_code == 2
    assert runner.invoke(app, ["check", str(tmp_path)]).exit_code == 2


def test_cli_stat_and_migrate(tmp_path: Path) -> None:
    p = tmp_path / "p"
    with open_log(p, create=True, segment_bytes=600) as log:
        for _ in range(10):
            log.publish([Message(value=b"x" * 50, timestamp=1_700_000_000_000)] * 3)
    res = runner.invoke(app, ["stat", "--segments", str(p)], env={"COLUMNS": "300"})
    assert res.exit_code == 0, res.output
    assert "messages" in res.output
    assert "2023-11-14 22:13:20.000" in res.output  # first/last time in UTC
    assert res.output.count(" p ") >= 3  # the log row and one row per segment
    res = runner.invoke(app, ["migrate", str(p)])
    assert res.exit_code == 0, res.output
    assert "format 1 -> 1" in res.output


def test_cli_stat_shows_the_remote_tier(tmp_path: Path) -> None:
    """A tiered log (found by its manifest copy, no setting): local start, remote segments
    and remote bytes columns."""
    p = tmp_path / "events-0"
    remote = RemoteStorage(f"file://{tmp_path / 'tier'}", cache_dir=str(tmp_path / "cache"))
    config = LogConfig(segment_messages=10, remote_storage_enable=True, local_retention_bytes=0)
    with Log.open(p, config, create=True, remote=remote) as log:
        for i in range(25):
            log.publish([Message(value=b"v%d" % i)])
        assert tier_sync(log).deleted_local == (0, 10)
        remote_bytes = log.stat()["remote_bytes"]
    res = runner.invoke(app, ["stat", str(p)], env={"COLUMNS": "400"})
    assert res.exit_code == 0, res.output
    assert "remote bytes" in res.output
    assert "local start" in res.output
    row = next(line for line in res.output.splitlines() if line.startswith("│ events-0"))
    cells = [c.strip() for c in row.strip("│ ").split("│")]
    assert cells[-3:] == ["20", "2", str(remote_bytes)]
