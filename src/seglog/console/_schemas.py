"""The console's view of a schema registry (Confluent's REST API: seglog's own, served by
``seglog serve --schema-registry-listen``, or any other): subjects with their versions,
the latest version's id and type. Read-only; the caller's ``Authorization`` header is
passed on, so a registry with Basic auth shows each user what the ACLs allow."""

from __future__ import annotations

import json
import urllib.error
import urllib.parse
import urllib.request
from typing import Any

__all__ = ["subjects"]

_ACCEPT = "application/vnd.schemaregistry.v1+json"


def _get(url: str, path: str, authorization: str | None) -> Any:
    request = urllib.request.Request(f"{url.rstrip('/')}/{path}", headers={"Accept": _ACCEPT})
    if authorization:
        request.add_header("Authorization", authorization)
    with urllib.request.urlopen(request, timeout=10) as response:
        return json.loads(response.read())


def subjects(url: str, authorization: str | None = None) -> list[dict[str, Any]]:
    """Every subject: ``{"subject", "versions", "id", "schemaType", "schema"}`` (the
    latest version's id, type and text). Raises OSError when the registry cannot be
    reached or refuses (urllib's HTTPError is one)."""
    out = []
    for subject in _get(url, "subjects", authorization):
        quoted = urllib.parse.quote(subject, safe="")
        versions = _get(url, f"subjects/{quoted}/versions", authorization)
        latest = _get(url, f"subjects/{quoted}/versions/latest", authorization)
        out.append({
            "subject": subject,
            "versions": versions,
            "id": latest["id"],
            "schemaType": latest.get("schemaType", "AVRO"),
            "schema": latest["schema"],
        })  # fmt: skip
    return out
