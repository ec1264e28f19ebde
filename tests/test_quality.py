"""The code gates run as tests, so `make test` (and CI) fails on a lint or type error."""

from __future__ import annotations

import ast
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
            "seglog.aio",
            "asyncio",
            "socket",
        ),
        "aio": ("seglog.columnar", "seglog.broker", "seglog.spark", "seglog.cli", "seglog.console"),
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
        base = ROOT / "src" / "seglog" / layer
        for path in base.rglob("*.py") if base.is_dir() else [base.with_suffix(".py")]:
            for line in path.read_text().splitlines():
                stripped = line.strip()
                if not stripped.startswith(("import ", "from ")):
                    continue
                module = stripped.split()[1]
                if any(module == n or module.startswith(n + ".") for n in names):
                    offenders.append(f"{path.relative_to(ROOT)}: {stripped}")
    assert offenders == []


def test_upper_layers_use_storage_public_names_only() -> None:
    """Nothing outside ``seglog.storage`` imports its inner modules (``storage.log.log``,
    ``storage.record.batch``...): only the names ``seglog.storage`` exports."""
    offenders = []
    for path in (ROOT / "src" / "seglog").rglob("*.py"):
        if "storage" in path.relative_to(ROOT / "src" / "seglog").parts[:1]:
            continue
        for line in path.read_text().splitlines():
            stripped = line.strip()
            if stripped.startswith(("import ", "from ")) and "seglog.storage." in stripped:
                offenders.append(f"{path.relative_to(ROOT)}: {stripped}")
    assert offenders == []


# storage's subpackages, lowest first: each imports only those before it (klevdb's shape)
STORAGE_ORDER = (
    "config", "record", "fileio", "index", "segment", "api", "log", "retention", "tools",
)  # fmt: skip


def _storage_imports() -> list[tuple[str, str, int, bool, bool]]:
    """(importing subpackage, imported subpackage, line, type-only, inside a function) for
    every import between storage's subpackages."""
    storage = ROOT / "src" / "seglog" / "storage"
    found: list[tuple[str, str, int, bool, bool]] = []

    def walk(node: ast.AST, where: str, type_only: bool, deferred: bool) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.If) and "TYPE_CHECKING" in ast.unparse(child.test):
                walk(child, where, True, deferred)
                continue
            in_function = isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef))
            if isinstance(child, ast.ImportFrom) and (child.module or "").startswith(
                "seglog.storage."
            ):
                target = child.module.split(".")[2]  # type: ignore[union-attr]
                found.append((where, target, child.lineno, type_only, deferred))
            walk(child, where, type_only, deferred or in_function)

    for path in storage.rglob("*.py"):
        rel = path.relative_to(storage)
        where = rel.parts[0] if len(rel.parts) > 1 else rel.stem
        if where in STORAGE_ORDER:
            walk(ast.parse(path.read_text()), where, False, False)
    return found


def test_storage_subpackages_import_one_way() -> None:
    """record < fileio < index < segment < log < retention < tools: no import (not even a
    type-only one) points up, and none hides in a function (deferred imports hid cycles)."""
    rank = {name: i for i, name in enumerate(STORAGE_ORDER)}
    # api.py (the contract) names the log's types in its signatures, type-only
    upward = [
        i for i in _storage_imports() if rank[i[1]] > rank[i[0]] and not (i[0] == "api" and i[3])
    ]
    deferred = [i for i in _storage_imports() if i[4]]
    assert upward == []
    assert deferred == []


def test_log_implements_its_whole_contract() -> None:
    """``Log`` defines every member of ``seglog.storage.api.LogAPI`` itself (a member it
    forgot would silently inherit the protocol's empty body), and each is documented there."""
    import inspect  # noqa: PLC0415

    from seglog.storage import Log, LogAPI  # noqa: PLC0415

    members = [n for n in vars(LogAPI) if not n.startswith("_")]
    assert len(members) > 30
    assert [n for n in members if n not in vars(Log)] == []
    assert [n for n in members if not inspect.getdoc(getattr(Log, n))] == []
