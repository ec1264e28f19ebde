"""``benchmarks/protobuf_decode_bench.py`` with tiny sizes (2,000 rows, one round): checks
that every row is printed with numbers and a ratio in ``seglog.bench``'s table (the
script itself refuses to run when the column-wise and record-by-record columns differ);
speed itself is never asserted here."""

from __future__ import annotations

from pathlib import Path

from tests._bench import run_bench

FLIGHT = "Protobuf decode, 10-field flight message (vectorised from the wire)"
ORDER = "Protobuf decode, nested Order message (vectorised from the wire)"
BROKEN = "Protobuf decode, nested Order, one value malformed (cut in halves)"


def test_protobuf_decode_bench_prints_every_row(tmp_path: Path) -> None:
    run = run_bench("protobuf_decode_bench.py", tmp_path, "--rows", "2000", "--repeat", "1")
    assert run.column("metric") == [FLIGHT] * 3 + [ORDER] * 2 + [BROKEN]
    assert run.column("reference_name") == [
        "record by record (decode_each)",
        "upb FromString loop alone",
        "Avro decoder, same rows",
        "record by record (decode_each)",
        "upb FromString loop alone",
        "record by record (decode_each)",
    ]
    assert run.column("target") == [10.0, None, None, None, None, None]
    run.check_report()
    assert run.rows[0]["met"] in (True, False)
