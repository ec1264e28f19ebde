"""The documentation: the MkDocs site builds, the README stays short, every Python sample runs.

What is checked:

- ``mkdocs build --strict`` (the ``mkdocs`` installed beside this interpreter, from the
  ``dev`` extra) builds the site from ``mkdocs.yml`` into a temporary directory: a broken
  link, a page missing from the navigation or any other warning fails it;
- README.md is at most 15 KB, holds no history words ("no longer", "used to", ...) and its
  relative links (and CHANGELOG.md's) name files that exist;
- nothing in README.md, CHANGELOG.md, mkdocs.yml or docs/ cites a file that lives outside
  the repository (``../shared``, the project's working notes);
- every fenced ``python`` block of README.md and docs/**/*.md is executed, one test per
  block, named ``file:line`` (the line of its opening fence). Shell blocks (``bash``,
  ``console``) and plain ``text`` blocks are not executed.

Conventions for the Python samples (write new ones the same way):

- a block runs alone: a fresh namespace (``__name__ == "__main__"``) in a fresh temporary
  working directory, so relative paths such as ``"data"`` land there; a block needs
  nothing from another block;
- ``127.0.0.1:9092`` and ``localhost:9092`` in a block are replaced by the address of a
  real ``seglog serve --num-partitions 3`` started once for this module
  (``seglog.broker.start_broker``, a subprocess with its own data directory): samples are
  written against the documented ``seglog serve --listen 127.0.0.1:9092 --num-partitions
  3`` and run against the test broker. Samples share that broker, so each uses its own
  topic and group names;
- a block that mentions ``pyspark`` is a Spark sample: it gets the ``spark`` marker and runs
  after this module has created the local SparkSession (``local[2]``, as tests/spark does),
  which the sample's own ``SparkSession.builder...getOrCreate()`` then returns. Spark
  resolves relative paths against the JVM's working directory, not the sample's, so Spark
  samples give Spark absolute paths (``Path("data").absolute()``);
- asyncio samples call ``asyncio.run`` themselves;
- a sample that raises fails its test; none is skipped.

The whole module is ``slow`` (it starts a broker and, for the Spark samples, a JVM): it is
not part of the fast tier.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from tests._spark import local_spark_session

from seglog.broker import BrokerProcess, start_broker

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
CHANGELOG = ROOT / "CHANGELOG.md"
DOCS = ROOT / "docs"
MKDOCS_YML = ROOT / "mkdocs.yml"
README_MAX_BYTES = 15 * 1024

PLACEHOLDERS = ("127.0.0.1:9092", "localhost:9092")
"""Bootstrap addresses in samples that the test broker's address replaces."""

OUT_OF_REPO = (
    "../shared",
    "shared/ARCHITECTURE.md",
    "RELIABILITY-NOTES",
    "PERF-NOTES",
    "SPARK-NOTES",
    "KAFKA-PROTOCOL-NOTES",
    "STYLE.md",
    "ARCHITECTURE.md",
)
"""Names of files outside the repository that the documentation must not cite (a bare
file name is allowed only if the repository holds a file of that name)."""

HISTORY_WORDS = re.compile(r"\bno longer\b|\bused to\b|\bpreviously\b|\bnow\b", re.IGNORECASE)

FENCE = re.compile(r"^(?P<indent>[ \t]*)(?P<fence>`{3,}|~{3,})[ \t]*(?P<info>[^`\n]*)$")


@dataclass(frozen=True)
class Sample:
    """One fenced python block: where it is and its source (dedented)."""

    path: Path
    line: int
    source: str

    @property
    def id(self) -> str:
        return f"{self.path.relative_to(ROOT)}:{self.line}"

    @property
    def needs_spark(self) -> bool:
        return "pyspark" in self.source

    @property
    def needs_broker(self) -> bool:
        return any(p in self.source for p in PLACEHOLDERS)


def doc_files() -> list[Path]:
    return [README, *sorted(DOCS.rglob("*.md"))]


def fenced_blocks(text: str) -> Iterator[tuple[int, str, str]]:
    """(1-based line of the opening fence, info string, dedented body) of each fenced block."""
    lines = text.splitlines()
    i = 0
    while i < len(lines):
        m = FENCE.match(lines[i])
        if m is None:
            i += 1
            continue
        indent, fence, info = m["indent"], m["fence"], m["info"].strip()
        body: list[str] = []
        j = i + 1
        while j < len(lines):
            stripped = lines[j].strip()
            if stripped.startswith(fence) and set(stripped) == {fence[0]}:
                break
            body.append(lines[j][len(indent) :] if lines[j].startswith(indent) else lines[j])
            j += 1
        else:
            raise AssertionError(f"unclosed code fence at line {i + 1}")
        yield i + 1, info, "\n".join(body) + "\n"
        i = j + 1


def python_samples() -> list[Sample]:
    out = []
    for path in doc_files():
        try:
            blocks = list(fenced_blocks(path.read_text(encoding="utf-8")))
        except AssertionError as e:
            raise AssertionError(f"{path.relative_to(ROOT)}: {e}") from None
        for line, info, body in blocks:
            words = info.split()
            if words and words[0] in ("python", "py", "python3"):
                out.append(Sample(path, line, body))
    return out


SAMPLES = python_samples()


def _sample_params() -> list[object]:
    return [
        pytest.param(s, id=s.id, marks=[pytest.mark.spark] if s.needs_spark else [])
        for s in SAMPLES
    ]


@pytest.fixture(scope="module")
def docs_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    """A real ``seglog serve`` for the samples that name 127.0.0.1:9092; it must stop
    cleanly (exit 0, no traceback in its log)."""
    proc = start_broker(
        tmp_path_factory.mktemp("docs-broker") / "data", extra_args=("--num-partitions", "3")
    )
    try:
        yield proc
    finally:
        code = proc.stop(signal.SIGTERM)
        log = proc.log_text()
        proc.log_path.unlink()
        assert code == 0, log
        assert "Traceback" not in log, log


@pytest.fixture(scope="module")
def spark_session() -> Iterator[object]:
    """The local SparkSession the Spark samples' ``getOrCreate()`` returns (tests/spark's
    settings). Stopped at the end of the module only if this fixture created it."""
    from pyspark.sql import SparkSession  # noqa: PLC0415 - only for the Spark samples

    existing = SparkSession.getActiveSession()
    session = local_spark_session()
    yield session
    if existing is None:
        session.stop()


@pytest.mark.parametrize("sample", _sample_params())
def test_python_sample_runs(
    sample: Sample,
    request: pytest.FixtureRequest,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    source = sample.source
    if sample.needs_broker:
        broker: BrokerProcess = request.getfixturevalue("docs_broker")
        for placeholder in PLACEHOLDERS:
            source = source.replace(placeholder, broker.bootstrap)
    if sample.needs_spark:
        request.getfixturevalue("spark_session")
    monkeypatch.chdir(tmp_path)
    code = compile(source, sample.id, "exec")
    exec(code, {"__name__": "__main__", "__file__": str(tmp_path / "sample.py")})


def test_samples_found() -> None:
    """The extractor sees the samples (a broken fence pattern would run nothing)."""
    files = {s.path for s in SAMPLES}
    assert README in files
    assert len(SAMPLES) >= 10, [s.id for s in SAMPLES]


def test_fenced_blocks_parser() -> None:
    text = "a\n```python\nx = 1\n```\n\n    ```bash\n    ls\n    ```\n```text\nz\n```\n"
    assert list(fenced_blocks(text)) == [
        (2, "python", "x = 1\n"),
        (6, "bash", "ls\n"),
        (9, "text", "z\n"),
    ]


def test_mkdocs_build_strict(tmp_path: Path) -> None:
    mkdocs = Path(sys.executable).with_name("mkdocs")
    assert mkdocs.exists(), f"{mkdocs} missing: pip install -e '.[dev]' (mkdocs-material)"
    result = subprocess.run(
        [
            *(str(mkdocs), "build", "--strict"),
            *("--config-file", str(MKDOCS_YML), "--site-dir", str(tmp_path / "site")),
        ],
        cwd=ROOT,
        env={**os.environ, "NO_MKDOCS_2_WARNING": "1"},
        capture_output=True,
        text=True,
        timeout=240,
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert (tmp_path / "site" / "index.html").exists()


def test_readme_size() -> None:
    size = README.stat().st_size
    assert size <= README_MAX_BYTES, f"README.md is {size} bytes, at most {README_MAX_BYTES}"


def test_readme_has_no_history_words() -> None:
    """The README says what is, not what changed (that goes to CHANGELOG.md)."""
    text = README.read_text(encoding="utf-8")
    found = [
        f"README.md:{n}: {line.strip()}"
        for n, line in enumerate(text.splitlines(), 1)
        if HISTORY_WORDS.search(line)
    ]
    assert found == []


@pytest.mark.parametrize("path", [README, CHANGELOG], ids=lambda p: p.name)
def test_relative_links_exist(path: Path) -> None:
    text = path.read_text(encoding="utf-8")
    missing = []
    for target in re.findall(r"\]\(([^)\s]+)\)", text):
        if re.match(r"[a-z]+:", target) or target.startswith("#"):
            continue
        if not (path.parent / target.split("#")[0]).exists():
            missing.append(target)
    assert missing == []


def _repo_file_names() -> set[str]:
    names: set[str] = set()
    skip = {"site", "node_modules", "__pycache__"}
    for _dirpath, dirnames, filenames in os.walk(ROOT):
        dirnames[:] = [d for d in dirnames if not d.startswith(".") and d not in skip]
        names.update(filenames)
    return names


def test_no_citations_outside_the_repository() -> None:
    names = _repo_file_names()
    forbidden = [c for c in OUT_OF_REPO if "/" in c or c not in names]
    files = [README, CHANGELOG, MKDOCS_YML, *sorted(p for p in DOCS.rglob("*") if p.is_file())]
    found = []
    for path in files:
        if path.suffix not in (".md", ".yml", ".yaml", ".txt", ".html", ".css", ".js"):
            continue
        for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            found += [f"{path.relative_to(ROOT)}:{n}: {c}" for c in forbidden if c in line]
    assert found == []
