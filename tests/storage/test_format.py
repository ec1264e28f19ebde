"""Format version file, checks at open, migration registry, check/CLI reporting."""

from __future__ import annotations

import pytest
import typer
from typer.testing import CliRunner

from seglog import Message, open_log
from seglog.cli._log_cmds import register
from seglog.errors import DataDirLockedError, FormatVersionError
from seglog.storage import FORMAT_VERSION, check, migrate, recover
from seglog.storage.segment.format_version import FORMAT_FILE


def test_written_at_create_and_missing_treated_as_v1(tmp_path):
    p = tmp_path / "p"
    with open_log(p, create=True) as log:
        log.publish([Message(value=b"x")])
    assert (p / FORMAT_FILE).read_text() == f"{FORMAT_VERSION}\n" == "1\n"
    (p / FORMAT_FILE).unlink()
    with open_log(p, read_only=True) as ro:  # read-only: accepted, not written
        assert ro.consume(0, 10)[1][0].value == b"x"
    assert not (p / FORMAT_FILE).exists()
    assert check(p)[0].ok
    assert check(p)[0].format_version == 1
    with open_log(p):  # a writer writes it
        pass
    assert (p / FORMAT_FILE).read_text() == "1\n"


@pytest.mark.parametrize(
    ("content", "words"), [("2\n", "newer"), ("0\n", "unreadable"), ("bogus", "unreadable")]
)
def test_unknown_version_refused(tmp_path, content, words):
    p = tmp_path / "p"
    with open_log(p, create=True) as log:
        log.publish([Message(value=b"x")])
    (p / FORMAT_FILE).write_text(content)
    before = sorted(f.name for f in p.iterdir())
    for read_only in (False, True):
        with pytest.raises(FormatVersionError, match=words):
            open_log(p, read_only=read_only)
    with pytest.raises(FormatVersionError):
        recover(p)
    assert sorted(f.name for f in p.iterdir()) == before  # nothing touched
    reports = check(p)
    assert not reports[0].ok
    assert any(words in problem for problem in reports[0].problems)
    app = typer.Typer()
    register(app)
    res = CliRunner().invoke(app, ["check", str(p)], env={"COLUMNS": "400"})
    assert res.exit_code == 1
    assert "format" in res.output


def test_migrate_registry(tmp_path):
    p = tmp_path / "p"
    with open_log(p, create=True) as log:
        log.publish([Message(value=b"x")])
    assert migrate(p) == [(p, 1, 1)]  # nothing to do at the current version
    steps = []

    def one_to_two(d):
        steps.append((d, (d / FORMAT_FILE).read_text()))
        (d / "migrated").write_text("yes")

    assert migrate(p, {1: one_to_two}) == [(p, 1, 2)]
    assert steps == [(p, "1\n")]
    assert (p / FORMAT_FILE).read_text() == "2\n"
    assert (p / "migrated").read_text() == "yes"
    assert migrate(p, {1: one_to_two}) == [(p, 2, 2)]  # idempotent: already there
    with pytest.raises(FormatVersionError, match="newer"):
        open_log(p)  # this seglog reads version 1 only
    with pytest.raises(FormatVersionError, match="no migration"):
        migrate(p, {2: one_to_two, 4: one_to_two})
    (p / FORMAT_FILE).write_text("1\n")
    with open_log(p), pytest.raises(DataDirLockedError):
        migrate(p, {1: one_to_two})  # never under a live writer
