"""SASL authentication: SaslHandshake (API 17, v1) and SaslAuthenticate (API 36, v0-2),
mechanisms PLAIN (RFC 4616) and SCRAM-SHA-256 / SCRAM-SHA-512 (RFC 5802, with ``scramp``),
checked against :class:`CredentialStore`.

On a SASL listener a connection may send only ApiVersions, SaslHandshake and
SaslAuthenticate until it has authenticated (anything else closes it, as Kafka does).
A failed authentication is answered with 58 SASL_AUTHENTICATION_FAILED and the connection
is closed; it is logged with the user name and mechanism, never a password or token, and
counted (``seglog_authentication_failures_total``). Re-authentication (KIP-368) is not
offered: ``session_lifetime_ms`` is 0, which tells clients the session never expires.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
from typing import Any

import scramp
from kafka.protocol.sasl import SaslAuthenticateResponse, SaslHandshakeResponse

from seglog.broker._context import BrokerContext

__all__ = ["SaslSession", "handle_sasl_authenticate", "handle_sasl_handshake"]

log = logging.getLogger(__name__)

UNSUPPORTED_SASL_MECHANISM = 33
ILLEGAL_SASL_STATE = 34
SASL_AUTHENTICATION_FAILED = 58


@dataclasses.dataclass
class SaslSession:
    """Where one connection is in its SASL exchange."""

    mechanism: str | None = None
    scram: Any = None  # scramp's ScramServer between the two SCRAM messages
    user: str | None = None


def handle_sasl_handshake(ctx: BrokerContext, conn: Any, req: Any, version: int) -> Any:
    """Choose the mechanism: 33 when it is not enabled (with the enabled list), 34 on a
    listener without SASL or after authentication."""
    resp = SaslHandshakeResponse[version]
    enabled = list(ctx.sasl_mechanisms)
    if not conn.listener.sasl or conn.authenticated:
        return resp(error_code=ILLEGAL_SASL_STATE, mechanisms=enabled)
    if req.mechanism not in enabled:
        return resp(error_code=UNSUPPORTED_SASL_MECHANISM, mechanisms=enabled)
    conn.sasl = SaslSession(mechanism=req.mechanism)
    return resp(error_code=0, mechanisms=enabled)


def _fail(ctx: BrokerContext, conn: Any, version: int, reason: str) -> Any:
    session: SaslSession | None = conn.sasl
    mechanism = session.mechanism if session and session.mechanism else "none"
    user = session.user if session and session.user else "?"
    log.warning(
        "authentication failed from %s: user %r, mechanism %s: %s",
        conn.peer,
        user,
        mechanism,
        reason,
    )
    ctx.metrics.auth_failures.labels(mechanism).inc()
    conn.sasl = None
    asyncio.get_running_loop().call_soon(conn.close_idle)  # after this answer is written
    return SaslAuthenticateResponse[version](
        error_code=SASL_AUTHENTICATION_FAILED,
        error_message=f"Authentication failed: {reason}",
        auth_bytes=b"",
        session_lifetime_ms=0,
    )


def _ok(conn: Any, version: int, user: str, token: bytes) -> Any:
    conn.authenticated = True
    conn.principal = f"User:{user}"
    conn.sasl = None
    log.info("authenticated %s as User:%s", conn.peer, user)
    return SaslAuthenticateResponse[version](
        error_code=0, error_message=None, auth_bytes=token, session_lifetime_ms=0
    )


def handle_sasl_authenticate(ctx: BrokerContext, conn: Any, req: Any, version: int) -> Any:
    """One step of the chosen mechanism (PLAIN: one message; SCRAM: client-first then
    client-final)."""
    session: SaslSession | None = conn.sasl
    if session is None or session.mechanism is None or conn.authenticated:
        return _fail(ctx, conn, version, "SaslAuthenticate without a SaslHandshake")
    store = ctx.credentials
    data = bytes(req.auth_bytes)
    if session.mechanism == "PLAIN":
        parts = data.split(b"\0")
        if len(parts) != 3:
            return _fail(ctx, conn, version, "malformed PLAIN message")
        _authzid, user_raw, password_raw = parts
        session.user = user_raw.decode(errors="replace")
        if store is None or not store.check_plain(
            session.user, password_raw.decode(errors="replace")
        ):
            return _fail(ctx, conn, version, "Invalid username or password")
        return _ok(conn, version, session.user, b"")
    # SCRAM-SHA-256 / -512
    try:
        if session.scram is None:
            mechanism = scramp.ScramMechanism(session.mechanism)

            def auth_fn(user: str) -> Any:
                session.user = user
                if store is None:
                    raise KeyError(user)
                return store.auth_info(user, session.mechanism or "")

            server = mechanism.make_server(auth_fn)
            server.set_client_first(data.decode())
            session.scram = server
            return SaslAuthenticateResponse[version](
                error_code=0,
                error_message=None,
                auth_bytes=server.get_server_first().encode(),
                session_lifetime_ms=0,
            )
        server = session.scram
        server.set_client_final(data.decode())
        return _ok(conn, version, session.user or "", server.get_server_final().encode())
    except (scramp.ScramException, KeyError, UnicodeDecodeError, ValueError) as exc:
        reason = "Invalid username or password" if isinstance(exc, KeyError) else str(exc)
        return _fail(ctx, conn, version, reason)
