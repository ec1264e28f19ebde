"""The argparse start of ``seglog produce`` and ``seglog consume`` (``cli._fast``) against
their typer commands: the same options, the same parsed values, typer for help and usage
errors, the same exit codes."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import typer.main

from seglog.cli import _consume, _produce, build_app
from seglog.cli._fast import Parser, parse

from .conftest import SEGLOG, Seglog

_PARSERS = {"produce": _produce._fast_parser, "consume": _consume._fast_parser}


def _typer_command(name: str) -> Any:
    return typer.main.get_command(build_app(client_only=True)).commands[name]  # type: ignore[attr-defined]


def parse_fast(argv: list[str], name: str = "produce") -> dict[str, Any] | None:
    parser: Parser = _PARSERS[name]()
    return parse(parser, argv)


@pytest.mark.parametrize("name", ["produce", "consume"])
def test_fast_parser_knows_every_option_of_the_command(name: str) -> None:
    typer_opts = {
        p.name: (sorted(p.opts + p.secondary_opts), p.default) for p in _typer_command(name).params
    }
    fast_opts = {
        a.dest: (sorted(a.option_strings) or [a.dest], a.default)
        for a in _PARSERS[name]()._actions  # argparse lists its actions nowhere public
    }
    # positionals: typer names them by their parameter, argparse by their dest
    typer_opts = {k: ([k], d) if opts == [k] else (opts, d) for k, (opts, d) in typer_opts.items()}
    assert fast_opts == typer_opts


def _normal(params: dict[str, Any]) -> dict[str, Any]:
    lists = {
        "files",
        "header",
        "extra",
        "partitions",
    }  # None (typer, argparse) or () (typer) when absent
    return {k: list(v or ()) if k in lists else v for k, v in params.items()}


@pytest.mark.parametrize(
    "argv",
    [
        ["t"],
        ["t", "a.txt", "b.txt", "-b", "h:1"],
        ["t", "-b", "h:1", "a.txt", "-k", "key", "-H", "a=b", "--header", "c=d", "-p", "2"],
        ["t", "-K", ":", "-D", "\\0", "-z", "zstd", "--acks", "1", "--json-input", "--json"],
        ["t", "--key=k", "-Xlinger.ms=5", "-X", "acks=0", "--bootstrap-server", "x:9"],
        ["t", "--security-protocol", "SASL_SSL", "--sasl-mechanism", "PLAIN"],
        ["t", "--sasl-username", "u", "--sasl-password", "p", "--ssl-ca-location", "ca.pem"],
        ["t", "-p", "-1", "--", "-file-with-dash"],
    ],
)
def test_fast_parse_equals_typer_parse(argv: list[str]) -> None:
    _same_parse("produce", argv)


def _same_parse(name: str, argv: list[str]) -> None:
    fast = parse_fast(argv, name)
    assert fast is not None
    client = fast.pop("client")
    fast.update(vars(client))
    expected = _typer_command(name).make_context(name, list(argv)).params
    assert _normal(fast) == _normal(expected)


@pytest.mark.parametrize(
    "argv",
    [
        ["t"],
        ["t", "-e", "-b", "h:1", "-o", "-10", "-p", "0", "--partition", "2", "-c", "5"],
        ["t", "--offset=@1700000000000", "-G", "g", "-f", "%k %v\\n", "--json", "-Xa=b"],
        ["-e", "t", "--exit", "--group", "g", "--format", "%v", "--count", "0"],
    ],
)
def test_fast_parse_equals_typer_parse_consume(argv: list[str]) -> None:
    _same_parse("consume", argv)


@pytest.mark.parametrize(
    "argv",
    [
        ["--help"],
        ["t", "-h"],
        [],
        ["t", "-p", "two"],
        ["t", "--jso"],  # click takes no abbreviations
        ["t", "--json=yes"],
        ["t", "--no-such-option"],
    ],
)
def test_fast_parse_leaves_help_and_usage_errors_to_typer(argv: list[str]) -> None:
    assert parse_fast(argv) is None
    assert parse_fast(argv, "consume") is None


def test_help_and_usage_errors_come_from_typer(seglog: Seglog) -> None:
    help_text = seglog("produce", "--help").stdout.decode()
    assert "Produce records from stdin or files" in help_text
    assert "enable.idempotence" in help_text
    bad = seglog("produce", "t", "-p", "two", check=False)
    assert bad.returncode == 2
    assert b"'-p' / '--partition'" in bad.stderr
    assert "Consume records and print them" in seglog("consume", "--help").stdout.decode()
    bad = seglog("consume", "t", "-c", "many", check=False)
    assert bad.returncode == 2
    assert b"'-c' / '--count'" in bad.stderr


def test_fast_start_imports_neither_typer_nor_pydantic(broker: str, topic: str) -> None:
    def run(*argv: str, stdin: bytes = b"") -> list[str]:
        code = (
            "import sys\n"
            f"sys.argv = ['seglog', *{argv!r}, '-b', {broker!r}]\n"
            "from seglog.cli import main\n"
            "main()\n"
            "print(sorted(m for m in ('typer', 'pydantic', 'rich') if m in sys.modules))\n"
        )
        done = subprocess.run(
            [sys.executable, "-c", code], input=stdin, capture_output=True, timeout=60, check=True
        )
        return done.stdout.decode().splitlines()

    assert run("produce", topic, stdin=b"a\nb\n") == ["[]"]
    assert run("consume", topic, "-e") == ["a", "b", "[]"]


def test_fast_start_keeps_the_exit_codes(seglog: Seglog, tmp_path: Path, topic: str) -> None:
    assert seglog("produce", topic, "-H", "no-equals", check=False).returncode == 2
    assert seglog("produce", topic, "-X", "no-equals", check=False).returncode == 2
    missing = seglog("produce", topic, str(tmp_path / "missing.txt"), check=False)
    assert missing.returncode == 2
    assert b"No such file or directory" in b" ".join(missing.stderr.split())  # rich wraps
    two = tmp_path / "two.txt"
    two.write_bytes(b"1\n2\n")
    assert seglog("produce", topic, str(two), str(two)).returncode == 0
    assert seglog("consume", topic, "-e", "-f", "%v\\n").stdout == b"1\n2\n1\n2\n"
    assert seglog("consume", topic, "-o", "soon", check=False).returncode == 2
    assert seglog("consume", topic, "-p", "9", "-e", check=False).returncode == 2
    assert seglog("consume", topic, "-o", "stored", check=False).returncode == 2


@pytest.mark.parametrize("key", [None, "k"])
def test_a_full_local_queue_loses_and_reorders_nothing(
    seglog: Seglog, topic: str, key: str | None
) -> None:
    # a queue of 7 records: produce() raises BufferError again and again mid-block
    lines = b"".join(b"%d\n" % i for i in range(3000))
    key_args = [] if key is None else ["-k", key]
    seglog("produce", topic, *key_args, "-X", "queue.buffering.max.messages=7", stdin=lines)
    out = seglog("consume", topic, "-e", "-f", "%k|%v\\n").stdout
    assert out == b"".join(b"%s|%d\n" % ((key or "").encode(), i) for i in range(3000))


def test_a_reader_that_goes_away_ends_consume_with_1_and_no_traceback(
    seglog: Seglog, broker: str, topic: str
) -> None:
    # 5 MB of output: far more than a pipe holds, so consume is still writing when the
    # reader closes its end
    seglog("produce", topic, stdin=b"".join(b"%05d" % i + b"x" * 995 + b"\n" for i in range(5000)))
    with subprocess.Popen(
        [*SEGLOG, "consume", topic, "-e", "-b", broker],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    ) as proc:
        assert proc.stdout is not None
        assert proc.stderr is not None
        assert proc.stdout.readline().startswith(b"00000x")
        proc.stdout.close()
        err = proc.stderr.read()
        assert proc.wait(60) == 1
    assert b"Traceback" not in err
