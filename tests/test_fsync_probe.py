"""The fsync probe runs end to end on tiny counts (a smoke test: no speed asserted)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from seglog.bench.fsync_probe import fsync_probe, main


def test_fsync_probe_rows(tmp_path: Path) -> None:
    lines: list[str] = []
    rows = fsync_probe(tmp_path, rounds=2, calls=3, walk_objects=10, progress=lines.append)
    names = [r.variant for r in rows]
    assert len(names) == 5
    assert names[0].startswith("reference")
    assert names[-1] == "publish_values"
    for r in rows:
        assert r.call_us > 0, r
        # each variant's calls ran an fdatasync (publish_values' through the log, timed
        # by the wrapper): a variant whose fdatasync went untimed would show 0 here
        assert 0 < r.fdatasync_p50_us < r.call_us, r
        assert 0 < r.fdatasync_mean_us < r.call_us, r
        assert r.rest_us == pytest.approx(r.call_us - r.fdatasync_mean_us)
    assert lines == ["round 1/2", "round 2/2"]
    assert list(tmp_path.iterdir()) == []  # every file, log and the temp dir removed
    assert os.fdatasync.__module__ == "posix"  # the timing wrapper was taken off


def test_fsync_probe_refuses_empty_runs(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="rounds and calls"):
        fsync_probe(tmp_path, rounds=0)


def test_fsync_probe_cli(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["--rounds", "1", "--calls", "2", "--walk", "5", "--dir", str(tmp_path)]
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert "publish_values" in out
    assert "fdatasync" in out
