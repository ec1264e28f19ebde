"""``python -m examples.flights``: the flights demo, end to end (see the package docstring).

Phases: start ``seglog serve`` → load the CSV into topic ``flights`` → start Spark → run
the streaming pipeline → check it against pandas → stop the broker → print the summary.
Exit status 0 on success, 1 on any failure (one ``error:`` line says which).
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

INSTALL_JAVA = "sudo apt-get install openjdk-17-jre-headless"
JAVA_MISSING = f"error: java not found — Spark 4 needs a JDK 17 or 21: {INSTALL_JAVA}"


def find_java() -> str | None:
    """The ``java`` Spark would launch: ``$JAVA_HOME/bin/java`` if JAVA_HOME is set, else
    the first ``java`` on PATH; None if there is none."""
    java_home = os.environ.get("JAVA_HOME")
    if java_home:
        candidate = Path(java_home) / "bin" / "java"
        return str(candidate) if os.access(candidate, os.X_OK) else None
    return shutil.which("java")


def java_major_version(java: str) -> int | None:
    """Major version of ``java`` from ``java -version`` (8 for "1.8.0_x"); None if unknown."""
    try:
        result = subprocess.run(
            [java, "-version"], capture_output=True, text=True, timeout=30, check=False
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    match = re.search(r'version "(\d+)(?:\.(\d+))?', result.stderr + result.stdout)
    if match is None:
        return None
    major = int(match.group(1))
    return int(match.group(2) or 0) if major == 1 else major


def _parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m examples.flights", description="seglog's NYC flights 2013 demo."
    )
    parser.add_argument(
        "--work-dir", type=Path, default=Path("data/demo"),
        help="run state, wiped at start: broker data dir, checkpoint, broker log "
        "(default: data/demo)",
    )  # fmt: skip
    parser.add_argument(
        "--out", type=Path, default=Path("out/flight_delays.parquet"),
        help="Parquet output directory, overwritten (default: out/flight_delays.parquet)",
    )  # fmt: skip
    parser.add_argument("--max-offsets-per-trigger", type=int, default=100_000)
    parser.add_argument("--partitions", type=int, default=3, help="partitions of `flights`")
    parser.add_argument(
        "--master", default="local[2]",
        help="Spark master: local[2] (default), local-cluster[2,1,1024] or spark://HOST:PORT",
    )  # fmt: skip
    parser.add_argument(
        "--source", choices=("path", "wire"), default="path",
        help="read topic `flights` from the broker's data directory (path: executors read "
        "the segment files, which must be on a filesystem they share) or through the "
        "broker (wire: kafka.bootstrap.servers)",
    )  # fmt: skip
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    """Run the demo; return the process exit status."""
    args = _parse_args(argv)
    java = find_java()
    if java is None:
        print(JAVA_MISSING, file=sys.stderr)
        return 1
    version = java_major_version(java)
    if version is not None and version < 17:
        print(f"error: {java} is Java {version} — Spark 4 needs 17 or 21: {INSTALL_JAVA}",
              file=sys.stderr)  # fmt: skip
        return 1
    from examples.flights.run import DemoError, run_demo  # noqa: PLC0415 - after the java check

    try:
        run_demo(
            work_dir=args.work_dir,
            parquet_path=args.out,
            partitions=args.partitions,
            max_offsets_per_trigger=args.max_offsets_per_trigger,
            master=args.master,
            source=args.source,
        )
    except DemoError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
