"""``seglog produce`` / ``seglog consume`` throughput next to kcat on the same data, the
same broker and the same run (issue goal: at least 0.5x kcat).

A file of N lines (100-byte values by default) is produced to a fresh topic by each tool
(kcat ``-P -l FILE`` / ``seglog produce TOPIC FILE``, both acks=all, both waiting for every
delivery), then each tool reads a topic of N records to /dev/null from the beginning and
exits at its end (kcat ``-C -e -q -f '%s\\n'`` / ``seglog consume -e``). Whole commands
are timed, process start included (that is what a user waits for). Repeats are
interleaved; medians and the ratio seglog/kcat are printed.

    .venv/bin/python benchmarks/cli_vs_kcat.py                  # 200k lines, 3 repeats
    .venv/bin/python benchmarks/cli_vs_kcat.py --lines 500000 --value-bytes 1000
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from seglog.broker import start_broker

SEGLOG = str(Path(sys.executable).with_name("seglog"))


def _timed(cmd: list[str], stdout: int | None = subprocess.DEVNULL) -> float:
    started = time.perf_counter()
    subprocess.run(cmd, check=True, stdout=stdout, stderr=subprocess.PIPE, timeout=600)
    return time.perf_counter() - started


def main() -> None:
    """Run the comparison and print a table."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lines", type=int, default=200_000)
    parser.add_argument("--value-bytes", type=int, default=100)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    kcat = shutil.which("kcat")
    if kcat is None:
        sys.exit("kcat not found: apt-get install kcat")
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        data = work / "lines.txt"
        line = b"x" * (args.value_bytes - 8)
        data.write_bytes(b"".join(b"%08d" % i + line + b"\n" for i in range(args.lines)))
        broker = start_broker(work / "data")
        try:
            b = broker.bootstrap
            times: dict[str, list[float]] = {
                k: [] for k in ("kcat P", "seglog P", "kcat C", "seglog C")
            }
            for r in range(args.repeat):
                kt, st = f"kcat-{r}", f"seglog-{r}"
                times["kcat P"].append(
                    _timed([kcat, "-P", "-b", b, "-t", kt, "-l", "-X", "acks=all", str(data)])
                )
                times["seglog P"].append(_timed([SEGLOG, "produce", st, str(data), "-b", b]))
                # each reads the topic the other wrote: same bytes, no cache advantage
                times["kcat C"].append(
                    _timed(
                        [kcat, "-C", "-b", b, "-t", st, "-e", "-q", "-o", "beginning", "-f", "%s\n"]
                    )
                )
                times["seglog C"].append(_timed([SEGLOG, "consume", kt, "-e", "-b", b]))
        finally:
            broker.stop()
    n = args.lines
    print(f"{n:,} records of {args.value_bytes} B, medians of {args.repeat} (whole commands)")
    print(f"{'':16}{'kcat':>14}{'seglog':>14}{'ratio':>8}")
    for label, k, s in (("produce", "kcat P", "seglog P"), ("consume", "kcat C", "seglog C")):
        kr, sr = n / statistics.median(times[k]), n / statistics.median(times[s])
        print(f"{label:16}{kr:>11,.0f}/s {sr:>11,.0f}/s {sr / kr:>7.2f}x")


if __name__ == "__main__":
    main()
