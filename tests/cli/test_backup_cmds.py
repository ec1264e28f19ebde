"""``seglog backup``, ``snapshot`` and ``restore``: through typer, and the real console script
through a pipe (snapshot to stdout, restore from stdin)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import typer
from tests.storage._backups import files, make, values
from typer.testing import CliRunner

from seglog.cli._backup_cmds import register

SEGLOG = Path(sys.executable).parent / "seglog"


def test_cli_backup_snapshot_restore(tmp_path):
    src = tmp_path / "src"
    make(src, 30)
    app = typer.Typer()
    register(app)
    runner = CliRunner()
    res = runner.invoke(app, ["backup", str(src), str(tmp_path / "b")])
    assert res.exit_code == 0, res.output
    assert "backed up" in res.output
    res = runner.invoke(app, ["snapshot", str(src), str(tmp_path / "s.tar")])
    assert res.exit_code == 0, res.output
    res = runner.invoke(app, ["restore", str(tmp_path / "s.tar"), str(tmp_path / "r")])
    assert res.exit_code == 0, res.output
    assert values(tmp_path / "r") == values(src)
    res = runner.invoke(app, ["restore", str(tmp_path / "s.tar"), str(tmp_path / "r")])
    assert res.exit_code == 2
    # the real console script, through a pipe: snapshot to stdout, restore from stdin
    snap = subprocess.Popen([str(SEGLOG), "snapshot", str(src), "-"], stdout=subprocess.PIPE)
    rest = subprocess.run(
        [str(SEGLOG), "restore", "-", str(tmp_path / "piped")],
        stdin=snap.stdout,
        capture_output=True,
        check=False,
    )
    assert snap.stdout is not None
    snap.stdout.close()
    assert snap.wait() == 0
    assert rest.returncode == 0, rest.stderr
    assert files(tmp_path / "piped") == files(tmp_path / "r")
