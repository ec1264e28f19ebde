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
STORAGE_ORDER = ("config", "record", "fileio", "index", "segment", "log", "retention", "tools")


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
    upward = [i for i in _storage_imports() if rank[i[1]] > rank[i[0]]]
    deferred = [i for i in _storage_imports() if i[4]]
    assert upward == []
    assert deferred == []


def test_storage_public_names_are_pinned() -> None:
    """``seglog.storage.__all__`` is the embedded contract: adding or removing a name is a
    decision (update this list and the README), and every name resolves."""
    import seglog.storage as storage  # noqa: PLC0415

    assert sorted(storage.__all__) == sorted(STORAGE_PUBLIC)
    for name in storage.__all__:
        assert getattr(storage, name) is not None, name


STORAGE_PUBLIC = (
    "AppendInfo", "FileSlice", "Log", "LogConfig", "open_log", "Message", "OFFSET_NEWEST",
    "OFFSET_OLDEST", "RecordColumns", "decode_columns", "DataDir", "TopicInfo", "atomic_write",
    "validate_topic_name", "CheckReport", "check", "recover", "stat", "FORMAT_VERSION",
    "migrate", "rebuild_key_index", "CancelToken", "BYTES", "JSON", "STR", "VARINT", "Codec",
    "TypedLog", "TypedMessage", "open_typed_log", "BackupReport", "RestoreReport",
    "SnapshotError", "backup", "restore", "snapshot", "ArchiveHook", "TrimResult",
    "trim_by_age", "trim_by_count", "trim_by_offset", "trim_by_size", "Removed", "compact",
    "compact_deletes", "compact_updates", "delete_offsets", "FileCounters", "LogStats",
    "SegmentStats", "BATCH_HEADER", "DEFAULT_DELETE_RETENTION_MS", "I64", "POLL_S",
    "encode_records", "log_directories", "new_batch_builder", "start_offset",
)  # fmt: skip
