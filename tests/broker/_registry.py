"""A ``seglog serve --schema-registry-listen`` for tests: the broker and its registry's
URL, started once the registry answers HTTP."""

from __future__ import annotations

import contextlib
import json
import urllib.error
import urllib.request
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from tests._wait import wait_until

from seglog.broker import BrokerProcess, free_port, start_broker

CONTENT_TYPE = "application/vnd.schemaregistry.v1+json"


def start_with_registry(
    data: Path,
    extra_args: Sequence[str] = (),
    registry_port: int | None = None,
    *,
    flag: bool = True,
) -> tuple[BrokerProcess, str]:
    """A broker serving its schema registry; (process, registry URL). ``flag=False``:
    ``extra_args`` name the registry's address (a properties file)."""
    port = registry_port or free_port()
    listen = ["--schema-registry-listen", f"127.0.0.1:{port}"] if flag else []
    proc = start_broker(data, extra_args=[*extra_args, *listen])
    url = f"http://127.0.0.1:{port}"
    wait_until(lambda: _answers(url), 30, 0.05, proc.log_text)
    return proc, url


def _answers(url: str) -> bool:
    with (
        contextlib.suppress(OSError),
        urllib.request.urlopen(url + "/schemas/types", timeout=2) as response,
    ):
        return bool(response.status == 200)
    return False


def rest(
    method: str, url: str, body: Any = None, raw: bytes | None = None,
    headers: dict[str, str] | None = None,
) -> tuple[int, Any]:  # fmt: skip
    """(HTTP status, decoded JSON body) of one request (errors included)."""
    data = raw if raw is not None else None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(url, data=data, method=method)
    request.add_header("Content-Type", CONTENT_TYPE)
    for name, value in (headers or {}).items():
        request.add_header(name, value)
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            status, text = response.status, response.read()
            content_type = response.headers.get("Content-Type", "")
    except urllib.error.HTTPError as exc:
        status, text = exc.code, exc.read()
        content_type = exc.headers.get("Content-Type", "")
    if content_type.startswith(CONTENT_TYPE):
        return status, json.loads(text)
    return status, text.decode()
