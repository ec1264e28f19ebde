"""The storage benchmark runs end to end on tiny sizes (a smoke test: no speed asserted)."""

from __future__ import annotations

import math
from pathlib import Path

from seglog.bench._storage_bench import storage_bench
from seglog.bench.storage import main, markdown


def test_storage_bench_rows(tmp_path: Path) -> None:
    lines: list[str] = []
    rows = storage_bench(
        tmp_path,
        size_bytes=2 << 20,
        messages=3000,
        compact_bytes=1 << 20,
        repeat=1,
        progress=lines.append,
    )
    names = [r.metric for r in rows]
    assert any(n.startswith("publish") for n in names)
    assert any(n.startswith("consume") for n in names)
    assert any(n.startswith("open after kill -9") for n in names)
    assert any(n.startswith("compaction") for n in names)
    for r in rows:
        assert r.seglog > 0, r
        assert math.isfinite(r.seglog), r
        assert len(r.samples) in {1, 2}  # clean opens: one per crash layout
        if r.reference is not None:
            assert r.ratio is not None
            assert r.ratio > 0
    assert lines  # progress was reported
    assert list(tmp_path.iterdir()) == []  # its temporary directory is gone
    table = markdown(rows)
    assert table.count("\n") == len(rows) + 2


def test_storage_bench_cli(tmp_path: Path) -> None:
    out = tmp_path / "rows.md"
    assert (
        main(
            [
                "--size", "1M", "--messages", "2000", "--compact-size", "1M", "--repeat", "1",
                "--dir", str(tmp_path), "--markdown", str(out),
            ]
        )
        == 0
    )  # fmt: skip
    assert "open after clean shutdown" in out.read_text()
