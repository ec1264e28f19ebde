"""seglog trim / seglog compact (the maintenance commands of the CLI)."""

from __future__ import annotations

from pathlib import Path

from tests.storage._cleaner import all_messages, keyed_log
from typer.testing import CliRunner

import seglog
from seglog.cli import app

runner = CliRunner()


def test_trim_and_compact_commands(tmp_path: Path) -> None:
    data = tmp_path / "data"
    keyed_log(data / "orders-0", 100, keys=5).close()
    keyed_log(data / "orders-1", 30, keys=5).close()
    res = runner.invoke(app, ["trim", str(data), "--before-offset", "20"])
    assert res.exit_code == 0, res.output
    assert "orders-0" in res.output
    res = runner.invoke(app, ["compact", str(data / "orders-0"), "--delete-retention-ms", "0"])
    assert res.exit_code == 0, res.output
    with seglog.open_log(data / "orders-0") as log:
        assert log.log_start_offset == 20
        msgs = all_messages(log)
        active = log.segments()[-1].base_offset
        closed_keys = [m.key for m in msgs if m.offset < active]
        assert len(closed_keys) == len(set(closed_keys))  # compacted
        assert msgs[-1].offset == 99
    res = runner.invoke(app, ["trim", str(data / "orders-1"), "--max-messages", "10"])
    assert res.exit_code == 0, res.output
    with seglog.open_log(data / "orders-1") as log:
        assert [m.offset for m in all_messages(log)] == list(range(20, 30))
    res = runner.invoke(app, ["trim", str(data)])
    assert res.exit_code != 0  # nothing to do: a usage error
    with seglog.open_log(data / "orders-1"):  # a writer holds the log: refused
        res = runner.invoke(app, ["compact", str(data / "orders-1")])
        assert res.exit_code == 2
        assert "another writer" in res.output
