"""The code gates run as tests, so `make test` (and CI) fails on a lint or type error."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(args, cwd=ROOT, capture_output=True, text=True, check=False)


def test_ruff_lint_is_clean() -> None:
    result = _run(str(BIN / "ruff"), "check", "src", "tests", "examples")
    assert result.returncode == 0, result.stdout + result.stderr


def test_ruff_format_is_clean() -> None:
    result = _run(str(BIN / "ruff"), "format", "--check", "src", "tests", "examples")
    assert result.returncode == 0, result.stdout + result.stderr


def test_mypy_strict_is_clean() -> None:
    result = _run(str(BIN / "mypy"))
    assert result.returncode == 0, result.stdout + result.stderr


def test_layers_import_downwards_only() -> None:
    """storage imports nothing above it; columnar (Arrow/Parquet of topics) only storage;
    broker imports no spark/cli/console; spark and console (siblings over the broker) no
    cli and not each other."""
    forbidden = {
        "storage": (
            "seglog.columnar",
            "seglog.broker",
            "seglog.spark",
            "seglog.cli",
            "seglog.console",
            "asyncio",
            "socket",
        ),
        "columnar": (
            "seglog.broker",
            "seglog.spark",
            "seglog.cli",
            "seglog.console",
            "pyspark",
            "asyncio",
        ),
        "broker": ("seglog.spark", "seglog.cli", "seglog.console"),
        "spark": ("seglog.cli", "seglog.console"),
        "console": ("seglog.cli", "seglog.spark", "pyspark"),  # a Kafka client beside spark
    }
    offenders = []
    for layer, names in forbidden.items():
        for path in (ROOT / "src" / "seglog" / layer).rglob("*.py"):
            for line in path.read_text().splitlines():
                stripped = line.strip()
                if not stripped.startswith(("import ", "from ")):
                    continue
                module = stripped.split()[1]
                if any(module == n or module.startswith(n + ".") for n in names):
                    offenders.append(f"{path.relative_to(ROOT)}: {stripped}")
    assert offenders == []


def test_upper_layers_use_storage_public_names_only() -> None:
    """Nothing outside ``seglog.storage`` imports its private modules (``storage._x``)."""
    offenders = []
    for path in (ROOT / "src" / "seglog").rglob("*.py"):
        if "storage" in path.relative_to(ROOT / "src" / "seglog").parts[:1]:
            continue
        for line in path.read_text().splitlines():
            stripped = line.strip()
            if stripped.startswith(("import ", "from ")) and "seglog.storage._" in stripped:
                offenders.append(f"{path.relative_to(ROOT)}: {stripped}")
    assert offenders == []
