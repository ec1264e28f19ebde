"""The console's Schemas page lists the subjects and versions of the broker's schema
registry (``seglog serve --console-listen --schema-registry-listen``)."""

from __future__ import annotations

import json
import urllib.request
from pathlib import Path
from typing import Any

from tests._wait import wait_until
from tests.broker._registry import rest

from seglog.broker import free_port, start_broker

SCHEMA = {"type": "record", "name": "Order", "fields": [{"name": "id", "type": "long"}]}


def _get(url: str) -> Any:
    with urllib.request.urlopen(url, timeout=5) as response:
        body = response.read()
    return body.decode() if url.endswith("/schemas") and "/api/" not in url else json.loads(body)


def test_schemas_page_lists_subjects_and_versions(tmp_path: Path) -> None:
    console, registry = free_port(), free_port()
    broker = start_broker(
        tmp_path / "data",
        port=free_port(),
        extra_args=[
            "--console-listen", f"127.0.0.1:{console}",
            "--schema-registry-listen", f"127.0.0.1:{registry}",
        ],
    )  # fmt: skip
    try:
        url = f"http://127.0.0.1:{registry}"
        wait_until(
            lambda: _get(f"{url}/subjects") == [], message=broker.log_text, ignore=(OSError,)
        )
        for n in (1, 2):
            fields = [*SCHEMA["fields"], *([{"name": "x", "type": "int", "default": 0}] * (n - 1))]
            status, _body = rest("POST", f"{url}/subjects/orders-value/versions",
                                 {"schema": json.dumps({**SCHEMA, "fields": fields})})  # fmt: skip
            assert status == 200
        api = wait_until(
            lambda: _get(f"http://127.0.0.1:{console}/api/schemas"),
            message=broker.log_text,
            ignore=(OSError,),
        )
        assert [(s["subject"], s["versions"], s["id"]) for s in api] == [
            ("orders-value", [1, 2], 2)
        ]
        page = _get(f"http://127.0.0.1:{console}/schemas")
        assert "orders-value" in page
        assert "1, 2" in page
    finally:
        assert broker.stop() == 0, broker.log_text()
