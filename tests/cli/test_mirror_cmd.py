"""``seglog mirror DATA_DIR``: writes the Parquet mirrors of mirrored topics; an unknown
topic is an operator error (exit 2), no traceback."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from tests.columnar._mirrored import TOPIC, fill

from seglog.columnar import mirrors_of
from seglog.storage import DataDir


def test_seglog_mirror_command(tmp_path: Path) -> None:
    path = tmp_path / "data"
    fill(path)
    seglog = [sys.executable, "-c", "from seglog.cli import main; main()"]
    result = subprocess.run(
        [*seglog, "mirror", str(path)], capture_output=True, text=True, check=False
    )
    assert result.returncode == 0, result.stderr
    assert "wrote mirrored-0/00000000000000000000.mirror-" in result.stdout
    with DataDir(path, create=False, read_only=True) as data_dir:
        assert len(mirrors_of(data_dir.log(TOPIC, 1))) == 5
    unknown = subprocess.run(
        [*seglog, "mirror", str(path), "--topic", "nope"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert unknown.returncode == 2
    assert "Traceback" not in unknown.stderr + unknown.stdout
