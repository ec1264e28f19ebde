"""``seglog serve --config server.properties``: Kafka's broker properties file.

The file is Java's properties format (``key=value``, ``key: value`` or ``key value``;
``#`` and ``!`` comments; a trailing backslash continues the line; ``\\t \\n \\\\``
escapes). The keys are the names of the broker config table (``BROKER_SETTINGS``:
``log.segment.bytes`` is ``--log-segment-bytes``), validated by it, plus the hand-written
options' names (``listeners``, ``sasl.enabled.mechanisms``, ``super.users``, ...).
``log.dirs`` / ``log.dir`` set ``--data-dir``, ``ssl.keystore.location`` and
``ssl.truststore.location`` (PEM files) ``--ssl-certfile`` and ``--ssl-cafile``. Each
value becomes the default of its option, so flags given on the command line win over the
file. Unknown keys are logged and ignored, as Kafka does; a bad value exits 2 naming the
file, line, key and flag.
"""

from __future__ import annotations

import logging
from pathlib import Path

import typer

from seglog.broker import BROKER_SETTINGS, BROKER_SETTINGS_BY_NAME

__all__ = ["load_server_properties", "parse_properties", "read_properties"]

log = logging.getLogger("seglog.cli")

_ALIASES = {
    "log.dirs": "data_dir",
    "log.dir": "data_dir",
    "ssl.keystore.location": "ssl_certfile",
    "ssl.truststore.location": "ssl_cafile",
}
_ESCAPES = {"t": "\t", "n": "\n", "r": "\r", "f": "\f"}


def _unescape(text: str) -> str:
    out, i = [], 0
    while i < len(text):
        ch = text[i]
        if ch == "\\" and i + 1 < len(text):
            nxt = text[i + 1]
            out.append(_ESCAPES.get(nxt, nxt))
            i += 2
            continue
        out.append(ch)
        i += 1
    return "".join(out)


def read_properties(text: str) -> dict[str, tuple[str, int]]:
    """Java properties text → {key: (value, line number)}: the line (1-based) a key
    starts on; the last of repeated keys wins."""
    lines = text.splitlines()
    out: dict[str, tuple[str, int]] = {}
    i = 0
    while i < len(lines):
        line = lines[i].lstrip()
        i += 1
        number = i
        while line.endswith("\\") and not line.endswith("\\\\") and i < len(lines):
            line = line[:-1] + lines[i].lstrip()
            i += 1
        if not line or line[0] in "#!":
            continue
        key_end = len(line)
        for pos, ch in enumerate(line):
            if ch in "=: \t" and (pos == 0 or line[pos - 1] != "\\"):
                key_end = pos
                break
        key = line[:key_end]
        rest = line[key_end:].lstrip(" \t")
        if rest[:1] in ("=", ":"):
            rest = rest[1:].lstrip(" \t")
        out[_unescape(key)] = (_unescape(rest), number)
    return out


def parse_properties(text: str) -> dict[str, str]:
    """Java properties text → {key: value} (the last of repeated keys wins)."""
    return {key: value for key, (value, _line) in read_properties(text).items()}


def load_server_properties(
    ctx: typer.Context, _param: typer.CallbackParam, value: Path | None
) -> Path | None:
    """Eager ``--config`` callback: the file's known keys become the other options'
    defaults (``ctx.default_map``). A key of ``BROKER_SETTINGS`` is parsed and validated
    here by the table, as its flag is; the hand-written options' keys are converted by
    their options. Raises typer.BadParameter when the file cannot be read or a value is
    bad (naming the file, line, key and flag)."""
    if value is None:
        return None
    try:
        props = read_properties(value.read_text())
    except OSError as exc:
        raise typer.BadParameter(f"{value}: {exc.strerror}") from None
    table_params = {s.param for s in BROKER_SETTINGS}
    names = {p.name for p in ctx.command.params if p.name} - table_params - {"config_file"}
    defaults = dict(ctx.default_map or {})
    for key, (raw, line) in props.items():
        where = f"{value} line {line}"
        setting = BROKER_SETTINGS_BY_NAME.get(key)
        if setting is not None:
            try:
                defaults[setting.param] = setting.parse(raw)
            except ValueError as exc:
                raise typer.BadParameter(f"{where}: {exc} ({setting.flag})") from None
            continue
        name = _ALIASES.get(key, key.replace(".", "_"))
        if name not in names:
            log.warning("%s: %s is not a seglog serve config: ignored", where, key)
            continue
        if name == "data_dir" and "," in raw:
            raise typer.BadParameter(f"{where}: {key}={raw}: seglog uses one data directory")
        defaults[name] = raw
    ctx.default_map = defaults
    return value
