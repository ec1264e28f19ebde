"""The code gates run as tests, so `make test` (and CI) fails on a lint or type error."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

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


@pytest.mark.slow  # mypy --strict over src: ~6 s (more without its cache)
def test_mypy_strict_is_clean() -> None:
    result = _run(str(BIN / "mypy"))
    assert result.returncode == 0, result.stdout + result.stderr


SRC = ROOT / "src"


def _module_name(path: Path) -> str:
    parts = path.relative_to(SRC).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _import_graph(*, type_only: bool) -> dict[str, set[str]]:
    """module → the modules it imports, for every module under src/ (``from pkg import
    name`` counts as importing ``pkg.name`` when that is a module, relative imports
    resolved; imports inside functions count; those under ``if TYPE_CHECKING:`` only
    with ``type_only``)."""
    paths = {_module_name(path): path for path in SRC.rglob("*.py")}
    graph: dict[str, set[str]] = {}
    for name, path in paths.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        imported = graph[name] = set()
        tree = ast.parse(path.read_text())
        if not type_only:  # drop the bodies of ``if TYPE_CHECKING:``
            for node in ast.walk(tree):
                if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
                    node.body = []
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                imported.update(alias.name for alias in node.names)
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    parent = package.rsplit(".", node.level - 1)[0]
                    base = f"{parent}.{base}" if base else parent
                for alias in node.names:
                    sub = f"{base}.{alias.name}"
                    imported.add(sub if sub in paths else base)
    return graph


def _layer(module: str) -> str | None:
    """``seglog.storage.log.log`` → ``storage``; ``seglog`` and ``pyspark_seglog`` → themselves;
    None for a module outside the project."""
    parts = module.split(".")
    if module == "seglog" or parts[0] == "pyspark_seglog":
        return parts[0]
    return parts[1] if parts[0] == "seglog" else None


# each layer (top-level package or module) with the layers it may import besides itself and
# errors (the error hierarchy) and _lazy (PEP 562 loading), below all:
# cli → spark/console → broker → columnar → storage
ALLOWED = {
    "seglog": ("storage",),  # the root re-exports storage's names
    "errors": (),
    "_lazy": (),  # PEP 562 lazy public names of the packages (standard library only)
    "_malloc": (),  # glibc malloc tuning of a long-running process (broker, Spark workers)
    "storage": (),
    "columnar": ("storage", "schemas"),  # Arrow/Parquet of topics, typed by the registry
    "schemas": ("storage",),  # the schema registry's formats, rules and _schemas store
    "aio": ("storage",),
    "iceberg": ("storage", "columnar", "schemas"),  # topics as Iceberg tables (pyiceberg)
    "broker": ("storage", "columnar", "schemas", "iceberg", "_malloc"),
    "spark": ("storage", "columnar", "schemas", "iceberg", "broker", "_malloc"),
    "console": ("storage", "columnar", "schemas", "iceberg", "broker"),  # a Kafka client
    "pyspark_seglog": ("storage", "columnar", "schemas", "iceberg", "broker", "spark", "_malloc"),
    "bench": (
        "storage",
        "columnar",
        "schemas",
        "iceberg",
        "aio",
        "broker",
        "spark",
        "console",
        "_malloc",
    ),
    "cli": (
        "storage",
        "columnar",
        "schemas",
        "iceberg",
        "aio",
        "broker",
        "spark",
        "console",
        "bench",
        "_malloc",
    ),
}
# outside libraries a layer must not import
BANNED = {
    "storage": ("asyncio", "socket"),
    "schemas": ("asyncio", "socket"),
    "columnar": ("pyspark", "asyncio"),
    "iceberg": ("pyspark", "asyncio"),
    "console": ("pyspark",),
}


def test_layers_import_downwards_only() -> None:
    """Every import (type-only ones too) between layers points down."""
    offenders = []
    for module, imported in sorted(_import_graph(type_only=True).items()):
        layer = _layer(module)
        assert layer in ALLOWED, f"{module}: add its package to ALLOWED"
        for target in sorted(imported):
            to = _layer(target)
            if to is None and target.split(".")[0] in BANNED.get(layer, ()):
                offenders.append(f"{module} imports {target}")
            if to not in (None, layer, "errors", "_lazy", *ALLOWED[layer]):
                offenders.append(f"{module} imports {target}")
    assert offenders == []


def _find_cycle(graph: dict[str, set[str]], nodes: set[str]) -> list[str]:
    """A cycle of imports among ``nodes`` (its path, first module repeated last), [] if none."""
    done: set[str] = set()
    path: list[str] = []

    def visit(node: str) -> list[str]:
        path.append(node)
        for nxt in sorted(graph[node] & nodes):
            if nxt in path:
                return [*path[path.index(nxt) :], nxt]
            if nxt not in done and (cycle := visit(nxt)):
                return cycle
        done.add(path.pop())
        return []

    for node in sorted(nodes - done):
        if cycle := visit(node):
            return cycle
    return []


@pytest.mark.parametrize(
    "package",
    ["seglog.storage", "seglog.columnar", "seglog.schemas", "seglog.iceberg", "seglog.broker",
     "seglog.spark", "seglog.console", "seglog.bench", "seglog.cli", "pyspark_seglog"],
)  # fmt: skip
def test_no_import_cycles(package: str) -> None:
    """The modules of ``package`` import one another without a cycle (imports that run:
    those under ``if TYPE_CHECKING:`` excluded)."""
    graph = _import_graph(type_only=False)
    nodes = {m for m in graph if m == package or m.startswith(package + ".")}
    cycle = _find_cycle(graph, nodes)
    assert cycle == [], " -> ".join(cycle)


def test_upper_layers_use_storage_public_names_only() -> None:
    """Nothing outside ``seglog.storage`` imports its inner modules (``storage.log.log``,
    ``storage.record.batch``...), in any form (``from seglog.storage import log`` names a
    module too; type-only imports included): only the names ``seglog.storage`` exports."""
    offenders = sorted(
        f"{module} imports {target}"
        for module, imported in _import_graph(type_only=True).items()
        if _layer(module) != "storage"
        for target in imported
        if target.startswith("seglog.storage.")
    )
    assert offenders == []


# storage's subpackages, lowest first: each imports only those before it (klevdb's shape)
STORAGE_ORDER = (
    "config", "record", "fileio", "index", "segment", "remote", "api", "log", "retention",
    "tools",
)  # fmt: skip


def _subpackage_imports(
    package: str, order: tuple[str, ...]
) -> list[tuple[str, str, int, bool, bool]]:
    """(importing subpackage, imported subpackage, line, type-only, inside a function) for
    every import between the subpackages (and top-level modules) of ``seglog.<package>``."""
    root = ROOT / "src" / "seglog" / package
    prefix = f"seglog.{package}."
    found: list[tuple[str, str, int, bool, bool]] = []

    def walk(node: ast.AST, where: str, type_only: bool, deferred: bool) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.If) and "TYPE_CHECKING" in ast.unparse(child.test):
                walk(child, where, True, deferred)
                continue
            in_function = isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef))
            if isinstance(child, ast.ImportFrom) and (child.module or "").startswith(prefix):
                target = child.module.split(".")[2]  # type: ignore[union-attr]
                found.append((where, target, child.lineno, type_only, deferred))
            walk(child, where, type_only, deferred or in_function)

    for path in root.rglob("*.py"):
        rel = path.relative_to(root)
        where = rel.parts[0] if len(rel.parts) > 1 else rel.stem
        if where in order:
            walk(ast.parse(path.read_text()), where, False, False)
    return found


def _storage_imports() -> list[tuple[str, str, int, bool, bool]]:
    return _subpackage_imports("storage", STORAGE_ORDER)


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


# the broker's subpackages and top-level modules, lowest first: each imports only those
# before it (Kafka's network / server / coordinator / log / security packages, aiokafka's
# protocol/); the package's __init__ only re-exports (type-only imports and a lazy loader)
BROKER_ORDER = (
    "protocol", "config", "security", "log", "coordinator", "metrics", "context", "apis",
    "schema_registry", "network", "process", "testing",
)  # fmt: skip


def test_broker_subpackages_import_one_way() -> None:
    """protocol < config < security < log < coordinator < metrics < context < apis <
    schema_registry < network < process: no import (not even a type-only one) points up or
    sideways to a later one, and none hides in a function."""
    rank = {name: i for i, name in enumerate(BROKER_ORDER)}
    found = _subpackage_imports("broker", BROKER_ORDER)
    assert {i[0] for i in found} >= {"apis", "network", "context"}  # the walk sees them
    upward = [i for i in found if rank[i[1]] > rank[i[0]]]
    deferred = [i for i in found if i[4]]
    assert upward == []
    assert deferred == []
    on_disk = {
        p.stem if p.is_file() else p.name
        for p in (SRC / "seglog" / "broker").iterdir()
        if (p.suffix == ".py" and p.stem != "__init__") or (p / "__init__.py").exists()
    }
    assert on_disk == set(BROKER_ORDER)  # a new module or subpackage gets its place here


def _is_private(module: str) -> bool:
    """A module path other packages may not import: one with a ``_private`` part, or a
    module inside ``seglog.broker`` or ``seglog.storage`` (their package exports the
    public names)."""
    parts = module.split(".")
    if any(p.startswith("_") and not p.startswith("__") for p in parts[1:]):
        return True
    return len(parts) > 2 and parts[0] == "seglog" and parts[1] in ("broker", "storage")


def _script_imports() -> list[tuple[str, str]]:
    """(file, module) for every ``seglog`` import in benchmarks/, scripts/ and examples/
    (``from m import _name`` also as ``m._name``)."""
    found = []
    for folder in ("benchmarks", "scripts", "examples"):
        for path in sorted((ROOT / folder).rglob("*.py")):
            for node in ast.walk(ast.parse(path.read_text())):
                names: list[str] = []
                if isinstance(node, ast.Import):
                    names = [a.name for a in node.names]
                elif isinstance(node, ast.ImportFrom) and node.level == 0:
                    # a private name counts as a private module: seglog.bench._x
                    names = [node.module or ""]
                    names += [f"{node.module}.{a.name}" for a in node.names if a.name[0] == "_"]
                found += [
                    (str(path.relative_to(ROOT)), n) for n in names if n.split(".")[0] == "seglog"
                ]
    return found


def test_other_packages_and_scripts_use_public_names_only() -> None:
    """Nothing outside ``seglog.broker`` imports its inner modules (type-only imports
    included), and benchmarks/, scripts/ and examples/ import only public names of any
    seglog package (no ``_private`` module or name)."""
    graph = _import_graph(type_only=True)
    inner = sorted(
        f"{module} imports {target}"
        for module, imported in graph.items()
        if _layer(module) != "broker"
        for target in imported
        if target.startswith("seglog.broker.")
    )
    scripts = _script_imports()
    assert len(scripts) > 10  # the walk sees them
    private = sorted(f"{path} imports {name}" for path, name in scripts if _is_private(name))
    assert inner == []
    assert private == []
