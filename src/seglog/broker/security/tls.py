"""TLS for SSL and SASL_SSL listeners, with the standard library's ``ssl``: TLS 1.2 and
newer only, the broker's PEM certificate chain and key, and optional client certificates
(``ssl.client.auth``: required, requested, none) whose subject becomes the principal
``User:CN=...,OU=...`` (Kafka's default principal builder: the full subject DN)."""

from __future__ import annotations

import ssl
from pathlib import Path
from typing import Any

__all__ = ["principal_from_cert", "server_context"]

_DN_NAMES = {
    "commonName": "CN",
    "organizationalUnitName": "OU",
    "organizationName": "O",
    "localityName": "L",
    "stateOrProvinceName": "ST",
    "countryName": "C",
}


def server_context(
    certfile: Path, keyfile: Path | None, cafile: Path | None, client_auth: str = "none"
) -> ssl.SSLContext:
    """An ``SSLContext`` for a TLS listener. ``client_auth``: "required" (a client without
    a certificate signed by ``cafile`` is refused), "requested", "none". Raises
    ValueError on a bad ``client_auth`` or a missing ``cafile`` it needs; ssl.SSLError /
    OSError on unreadable certificates."""
    if client_auth not in ("required", "requested", "none"):
        raise ValueError(f"ssl.client.auth {client_auth!r}: required, requested or none")
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.minimum_version = ssl.TLSVersion.TLSv1_2
    ctx.load_cert_chain(str(certfile), None if keyfile is None else str(keyfile))
    if client_auth != "none":
        if cafile is None:
            raise ValueError(f"ssl.client.auth={client_auth} needs a CA file (--ssl-cafile)")
        ctx.load_verify_locations(str(cafile))
        ctx.verify_mode = ssl.CERT_REQUIRED if client_auth == "required" else ssl.CERT_OPTIONAL
    return ctx


def _escape(value: str) -> str:
    """An attribute value as RFC 2253 (Java's ``X500Principal.getName()``) writes it:
    ``,+"\\<>;`` escaped with a backslash, and a leading ``#`` or space and a trailing
    space; else a common name holding ``,OU=...`` would read as another DN."""
    out = "".join("\\" + c if c in ',+"\\<>;' else c for c in value)
    if value.startswith(("#", " ")):
        out = "\\" + out
    if value.endswith(" ") and len(value) > 1:
        out = out[:-1] + "\\ "
    return out


def principal_from_cert(cert: Any) -> str | None:
    """``User:<subject DN>`` (RFC 2253: reversed order, values escaped, the attributes
    of a multi-valued RDN joined with ``+``; as Kafka prints it) of a peer certificate
    from ``getpeercert()``, or None without one."""
    if not cert:
        return None
    rdns = []
    for rdn in reversed(cert.get("subject", ())):
        rdns.append("+".join(f"{_DN_NAMES.get(key, key)}={_escape(value)}" for key, value in rdn))
    return "User:" + ",".join(rdns) if rdns else None
