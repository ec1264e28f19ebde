"""``seglog serve --config server.properties``: Kafka's broker properties file.

The file is Java's properties format (``key=value``, ``key: value`` or ``key value``;
``#`` and ``!`` comments; a trailing backslash continues the line; ``\\t \\n \\\\``
escapes). Each known key becomes the default of the ``seglog serve`` option of the same
name (``log.segment.bytes`` → ``--log-segment-bytes``), so flags given on the command line
win over the file; ``log.dirs`` / ``log.dir`` set ``--data-dir``, ``ssl.keystore.location``
and ``ssl.truststore.location`` (PEM files) ``--ssl-certfile`` and ``--ssl-cafile``.
Unknown keys are logged and ignored, as Kafka does; a bad value fails like the flag would.
"""

from __future__ import annotations

import logging
from pathlib import Path

import typer

__all__ = ["load_server_properties", "parse_properties"]

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


def parse_properties(text: str) -> dict[str, str]:
    """Java properties text → {key: value} (the last of repeated keys wins)."""
    lines = text.splitlines()
    out: dict[str, str] = {}
    i = 0
    while i < len(lines):
        line = lines[i].lstrip()
        i += 1
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
        out[_unescape(key)] = _unescape(rest)
    return out


def load_server_properties(
    ctx: typer.Context, _param: typer.CallbackParam, value: Path | None
) -> Path | None:
    """Eager ``--config`` callback: the file's known keys become the other options'
    defaults (``ctx.default_map``). Raises typer.BadParameter when it cannot be read."""
    if value is None:
        return None
    try:
        props = parse_properties(value.read_text())
    except OSError as exc:
        raise typer.BadParameter(f"{value}: {exc.strerror}") from None
    names = {p.name for p in ctx.command.params if p.name}
    defaults = dict(ctx.default_map or {})
    for key, raw in props.items():
        name = _ALIASES.get(key, key.replace(".", "_").replace("-", "_"))
        if name not in names or name == "config_file":
            log.warning("%s: %s is not a seglog serve config: ignored", value, key)
            continue
        if name == "data_dir" and "," in raw:
            raise typer.BadParameter(f"{key}={raw}: seglog uses one data directory")
        defaults[name] = raw
    ctx.default_map = defaults
    return value
