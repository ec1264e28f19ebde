"""A small blocking client of Confluent Schema Registry's REST API v1 (seglog's own
registry, ``seglog serve --schema-registry-listen``, or any other): the standard
library's HTTP client, HTTP Basic credentials and a CA file for HTTPS. Errors are
Confluent's ``{"error_code", "message"}`` bodies, raised as :class:`RegistryCallError`."""

from __future__ import annotations

import base64
import json
import ssl
import urllib.error
import urllib.parse
import urllib.request
from typing import Any

__all__ = ["CONTENT_TYPE", "RegistryCallError", "RegistryClient"]

CONTENT_TYPE = "application/vnd.schemaregistry.v1+json"


class RegistryCallError(Exception):
    """A refusal (HTTP status, Confluent error code, message) or a transport failure
    (status 0)."""

    def __init__(self, status: int, code: int, message: str) -> None:
        super().__init__(f"{code} {message}" if code else message)
        self.status, self.code, self.message = status, code, message


class RegistryClient:
    """Calls to one registry: ``url`` (http or https), ``user_info`` ``USER:PASSWORD``
    (Basic auth; None: none), ``cafile`` (PEM CAs of an HTTPS registry)."""

    def __init__(self, url: str, user_info: str | None = None, cafile: str | None = None) -> None:
        self.url = url.rstrip("/")
        self._headers = {"Accept": CONTENT_TYPE, "Content-Type": CONTENT_TYPE}
        if user_info:
            token = base64.b64encode(user_info.encode()).decode()
            self._headers["Authorization"] = f"Basic {token}"
        self._context = ssl.create_default_context(cafile=cafile) if cafile else None

    def call(self, method: str, path: str, body: Any = None, **query: Any) -> Any:
        """One request: ``path`` relative to the URL (its parts already quoted),
        ``query`` flags. Raises RegistryCallError."""
        params = {k: str(v).lower() if isinstance(v, bool) else str(v)
                  for k, v in query.items() if v is not None}  # fmt: skip
        target = f"{self.url}/{path.lstrip('/')}"
        if params:
            target += "?" + urllib.parse.urlencode(params)
        data = None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(target, data, self._headers, method=method)
        try:
            with urllib.request.urlopen(request, timeout=30, context=self._context) as response:
                text = response.read()
        except urllib.error.HTTPError as exc:
            raw = exc.read()
            try:
                doc = json.loads(raw)
                raise RegistryCallError(
                    exc.code, int(doc["error_code"]), str(doc["message"])
                ) from None
            except (ValueError, KeyError, TypeError):
                raise RegistryCallError(exc.code, exc.code, raw.decode(errors="replace")) from None
        except OSError as exc:
            raise RegistryCallError(0, 0, f"cannot reach {self.url}: {exc}") from None
        return json.loads(text) if text else None


def quote(name: str) -> str:
    """A subject as one path segment."""
    return urllib.parse.quote(name, safe="")
