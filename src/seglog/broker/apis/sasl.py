"""SASL authentication: SaslHandshake (API 17, v1) and SaslAuthenticate (API 36, v0-2),
mechanisms PLAIN (RFC 4616) and SCRAM-SHA-256 / SCRAM-SHA-512 (RFC 5802, with ``scramp``),
checked against :class:`CredentialStore`.

On a SASL listener a connection may send only ApiVersions, SaslHandshake and
SaslAuthenticate until it has authenticated (anything else closes it, as Kafka does).
A failed authentication is answered with 58 SASL_AUTHENTICATION_FAILED and the connection
is closed; it is logged with the user name and mechanism, never a password or token, and
counted (``seglog_authentication_failures_total``).

Re-authentication (KIP-368), as Kafka's broker does it: with ``connections.max.reauth.ms``
N > 0 a successful SaslAuthenticate answers ``session_lifetime_ms`` = N (PLAIN and SCRAM
credentials have no lifetime of their own to shorten it) and the session expires N ms
later. An authenticated connection may then send SaslHandshake + SaslAuthenticate again:
the same mechanism and the same principal, else 58 and the connection is closed; at most
one re-authentication starts per second (an earlier SaslHandshake is answered 34
ILLEGAL_SASL_STATE, the connection stays open). Between that SaslHandshake and its
successful SaslAuthenticate any other request closes the connection, and once the session
has expired any request but SaslHandshake closes it
(``seglog_expired_sessions_closed_total``). Re-authentications are counted
(``seglog_reauthentications_total``). With N = 0 (Kafka's default) ``session_lifetime_ms``
is 0, sessions never expire and a SaslHandshake after authentication is answered 34.

SCRAM client-final messages whose nonce is the client nonce followed by the whole server
nonce (the client nonce twice: librdkafka before 2.6.1, e.g. Debian's kcat) are accepted,
as Kafka accepts them since 3.8.1; the proof is still checked over the message as sent.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import scramp
from kafka.protocol.sasl import SaslAuthenticateResponse, SaslHandshakeResponse

from seglog.broker.context import BrokerContext, RequestContext
from seglog.broker.protocol.api_keys import ApiKey
from seglog.broker.protocol.errors import (
    ILLEGAL_SASL_STATE,
    SASL_AUTHENTICATION_FAILED,
    UNSUPPORTED_SASL_MECHANISM,
)
from seglog.broker.security.session import SaslExchange, Session
from seglog.errors import ProtocolError

__all__ = [
    "check_session",
    "handle_sasl_authenticate",
    "handle_sasl_handshake",
]

log = logging.getLogger(__name__)

MIN_REAUTH_INTERVAL_S = 1.0  # Kafka: one re-authentication per second at most


def check_session(ctx: BrokerContext, session: Session, api_key: int, api_name: str) -> None:
    """Refuse a request the connection's SASL session does not allow now: anything but
    SaslAuthenticate while re-authenticating, anything but SaslHandshake once the session
    has expired. Raises ProtocolError (the connection is closed, as Kafka closes it)."""
    exchange = session.exchange
    if exchange is not None and exchange.reauth:
        if api_key != ApiKey.SASL_AUTHENTICATE:
            raise ProtocolError(f"{api_name} during SASL re-authentication")
        return
    expires = session.expires
    if (
        expires is not None
        and api_key != ApiKey.SASL_HANDSHAKE
        and asyncio.get_running_loop().time() > expires
    ):
        ctx.metrics.expired_sessions_closed.inc()
        raise ProtocolError(
            f"{api_name} after the SASL session of {session.principal} expired"
            " (connections.max.reauth.ms) without re-authentication"
        )


def handle_sasl_handshake(ctx: BrokerContext, rctx: RequestContext, req: Any) -> Any:
    """Choose the mechanism: 33 when it is not enabled (with the enabled list), 34 on a
    listener without SASL. On an authenticated connection it starts a re-authentication
    when sessions expire (``connections.max.reauth.ms`` > 0) and the last one started at
    least a second ago, else it is answered 34."""
    version = rctx.api_version
    resp = SaslHandshakeResponse[version]
    enabled = list(ctx.sasl_mechanisms)
    session = rctx.session
    if not rctx.sasl_listener:
        return resp(error_code=ILLEGAL_SASL_STATE, mechanisms=enabled)
    if session.authenticated:
        now = asyncio.get_running_loop().time()
        last = session.reauth_started
        if session.expires is None or (last is not None and now - last < MIN_REAUTH_INTERVAL_S):
            return resp(error_code=ILLEGAL_SASL_STATE, mechanisms=enabled)
        session.reauth_started = now
        if req.mechanism not in enabled:
            _close_soon(rctx)
            return resp(error_code=UNSUPPORTED_SASL_MECHANISM, mechanisms=enabled)
        # a different mechanism is refused at its SaslAuthenticate (58), as Kafka does
        session.exchange = SaslExchange(mechanism=req.mechanism, reauth=True)
        return resp(error_code=0, mechanisms=enabled)
    if req.mechanism not in enabled:
        return resp(error_code=UNSUPPORTED_SASL_MECHANISM, mechanisms=enabled)
    session.exchange = SaslExchange(mechanism=req.mechanism)
    return resp(error_code=0, mechanisms=enabled)


def _close_soon(rctx: RequestContext) -> None:
    """Close after the answer being built is written; requests already received after it
    are refused (``authenticated`` False), never served with the old principal."""
    rctx.session.authenticated = False
    asyncio.get_running_loop().call_soon(rctx.close_connection)


def _fail(ctx: BrokerContext, rctx: RequestContext, reason: str) -> Any:
    exchange = rctx.session.exchange
    mechanism = exchange.mechanism if exchange and exchange.mechanism else "none"
    user = exchange.user if exchange and exchange.user else "?"
    log.warning(
        "%s failed from %s: user %r, mechanism %s: %s",
        "re-authentication" if exchange and exchange.reauth else "authentication",
        rctx.peer,
        user,
        mechanism,
        reason,
    )
    ctx.metrics.auth_failures.labels(mechanism).inc()
    rctx.session.exchange = None
    _close_soon(rctx)
    return SaslAuthenticateResponse[rctx.api_version](
        error_code=SASL_AUTHENTICATION_FAILED,
        error_message=f"Authentication failed: {reason}",
        auth_bytes=b"",
        session_lifetime_ms=0,
    )


def _ok(ctx: BrokerContext, rctx: RequestContext, user: str, token: bytes) -> Any:
    session = rctx.session
    exchange = session.exchange
    assert exchange is not None
    principal = f"User:{user}"
    if exchange.reauth and principal != session.principal:
        return _fail(
            ctx,
            rctx,
            f"Cannot change principals during re-authentication from {session.principal}:"
            f" {principal}",
        )
    lifetime_ms = ctx.config.connections_max_reauth_ms
    now = asyncio.get_running_loop().time()
    session.expires = now + lifetime_ms / 1000 if lifetime_ms > 0 else None
    session.authenticated = True
    session.principal = principal
    session.mechanism = exchange.mechanism
    session.exchange = None
    if exchange.reauth:
        ctx.metrics.reauthentications.labels(exchange.mechanism or "none").inc()
        log.info("re-authenticated %s as %s (%d ms session)", rctx.peer, principal, lifetime_ms)
    else:
        log.info("authenticated %s as %s", rctx.peer, principal)
    return SaslAuthenticateResponse[rctx.api_version](
        error_code=0, error_message=None, auth_bytes=token, session_lifetime_ms=lifetime_ms
    )


def _accept_doubled_client_nonce(server: Any, client_final: str) -> None:
    """librdkafka before 2.6.1 (Debian's kcat: 2.0.2) puts its client nonce before the
    server-first nonce, which already starts with it: ``r=`` cnonce + cnonce + snonce.
    Kafka accepts that since 3.8.1 (the nonce must end with the server nonce); scramp
    wants RFC 5802's exact nonce. For exactly that form the expected nonce becomes the one
    sent, so the proof is checked over the message as sent (it still holds this
    exchange's server nonce: no replay). Any other nonce is left to scramp to refuse."""
    nonce, s_nonce = getattr(server, "nonce", None), getattr(server, "s_nonce", None)
    if nonce is None or s_nonce is None:
        return
    expected = str(nonce)
    c_nonce = expected[: len(expected) - len(str(s_nonce))]
    for attribute in client_final.split(","):
        if attribute.startswith("r="):
            if c_nonce and attribute[2:] == c_nonce + expected:
                server.nonce = type(nonce)(attribute[2:])
            return


def handle_sasl_authenticate(ctx: BrokerContext, rctx: RequestContext, req: Any) -> Any:
    """One step of the chosen mechanism (PLAIN: one message; SCRAM: client-first then
    client-final). The last step answers ``session_lifetime_ms`` (``connections.max.
    reauth.ms``; 0: the session never expires); a re-authentication must keep the
    connection's mechanism and principal (else 58 and the connection is closed)."""
    version = rctx.api_version
    session = rctx.session.exchange
    if (
        session is None
        or session.mechanism is None
        or (rctx.session.authenticated and not session.reauth)
    ):
        return _fail(ctx, rctx, "SaslAuthenticate without a SaslHandshake")
    if session.reauth and session.mechanism != rctx.session.mechanism:
        return _fail(
            ctx,
            rctx,
            f"SASL mechanism {session.mechanism} requested by client is not supported for"
            f" re-authentication of mechanism {rctx.session.mechanism}",
        )
    store = ctx.credentials
    data = bytes(req.auth_bytes)
    if session.mechanism == "PLAIN":
        parts = data.split(b"\0")
        if len(parts) != 3:
            return _fail(ctx, rctx, "malformed PLAIN message")
        _authzid, user_raw, password_raw = parts
        session.user = user_raw.decode(errors="replace")
        if store is None or not store.check_plain(
            session.user, password_raw.decode(errors="replace")
        ):
            return _fail(ctx, rctx, "Invalid username or password")
        return _ok(ctx, rctx, session.user, b"")
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
        client_final = data.decode()
        _accept_doubled_client_nonce(server, client_final)
        server.set_client_final(client_final)
        return _ok(ctx, rctx, session.user or "", server.get_server_final().encode())
    except (scramp.ScramException, KeyError, UnicodeDecodeError, ValueError) as exc:
        reason = "Invalid username or password" if isinstance(exc, KeyError) else str(exc)
        return _fail(ctx, rctx, reason)
