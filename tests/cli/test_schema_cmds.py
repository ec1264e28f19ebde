"""``seglog schema list|get|register|check|delete|config`` against a real
``seglog serve --schema-registry-listen``, run as a user runs them."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from tests.broker._registry import start_with_registry

pytestmark = pytest.mark.broker  # starts seglog serve (through start_with_registry)

SEGLOG = str(Path(sys.executable).with_name("seglog"))
V1 = {"type": "record", "name": "Trip", "fields": [{"name": "id", "type": "long"}]}
V2 = {**V1, "fields": [*V1["fields"], {"name": "km", "type": "double", "default": 0.0}]}
BAD = {**V1, "fields": [{"name": "id", "type": "string"}]}


@pytest.fixture(scope="module")
def url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    proc, registry_url = start_with_registry(tmp_path_factory.mktemp("schema-cli") / "data")
    try:
        yield registry_url
    finally:
        assert proc.stop() == 0, proc.log_text()


def _seglog(url: str, *args: str, code: int = 0) -> str:
    done = subprocess.run(
        [SEGLOG, "schema", *args, "--registry-url", url], capture_output=True, check=False
    )
    assert done.returncode == code, done.stderr.decode() + done.stdout.decode()
    return done.stdout.decode() + done.stderr.decode()


def test_register_get_check_list_config_delete(url: str, tmp_path: Path) -> None:
    files = {}
    for name, doc in (("v1", V1), ("v2", V2), ("bad", BAD)):
        files[name] = tmp_path / f"{name}.avsc"
        files[name].write_text(json.dumps(doc, indent=2))
    assert _seglog(url, "register", "trips-value", str(files["v1"])).strip() == "id 1 version 1"
    assert json.loads(_seglog(url, "get", "trips-value")) == V1
    assert json.loads(_seglog(url, "get", "--id", "1")) == V1
    assert _seglog(url, "check", "trips-value", str(files["v2"])).strip() == "compatible"
    out = _seglog(url, "check", "trips-value", str(files["bad"]), code=1)
    assert "incompatible" in out
    assert "409" in _seglog(url, "register", "trips-value", str(files["bad"]), code=1)
    _seglog(url, "register", "trips-value", str(files["v2"]))
    rows = json.loads(_seglog(url, "list", "--json"))
    assert rows == [{"subject": "trips-value", "versions": [1, 2], "id": 2, "schemaType": "AVRO"}]
    assert "trips-value" in _seglog(url, "list")
    assert _seglog(url, "config").strip() == "BACKWARD"
    assert _seglog(url, "config", "trips-value", "--set", "full").strip() == "FULL"
    assert _seglog(url, "config", "trips-value").strip() == "FULL"
    assert "42203" in _seglog(url, "config", "--set", "sideways", code=1)
    assert "40401" in _seglog(url, "get", "nope-value", code=1)
    assert "deleted trips-value version(s) 2" in _seglog(
        url, "delete", "trips-value", "--version", "2"
    )
    assert "deleted trips-value version(s) 1" in _seglog(url, "delete", "trips-value")
    _seglog(url, "delete", "trips-value", "--permanent")
    assert json.loads(_seglog(url, "list", "--json", "--deleted")) == []
