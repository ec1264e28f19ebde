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

An authorization id (PLAIN's first field, RFC 4616; SCRAM's ``a=`` in the GS2 header, RFC
5802) other than the user name is refused once the credentials are checked, as Kafka's
``PlainSaslServer`` and ``ScramSaslServer`` refuse it: 58 with "Authentication failed:
Client requested an authorization id that is different from username". An empty one, or
the user name itself, is accepted (SCRAM's client-final then binds the header as sent).
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
AUTHZID_MISMATCH = "Client requested an authorization id that is different from username"
"""Kafka's reason (after "Authentication failed: ") for an authorization id that is not
the user name."""


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


def _saslname(text: str) -> str:
    """RFC 5802's saslname decoded: ``=2C`` is ",", ``=3D`` is "="."""
    return text.replace("=2C", ",").replace("=3D", "=")


def _take_authzid(client_first: str) -> tuple[str, str, str] | None:
    """A SCRAM client-first message with a GS2 authzid, ``n,a=NAME,n=USER,r=...``, as
    (the message without it: ``n,,n=USER,r=...``, which scramp accepts; NAME; the GS2
    header as sent: ``n,a=NAME,``). None for any other message (no authzid, or not of
    that form: scramp then answers it)."""
    flag, sep, rest = client_first.partition(",")
    if not sep or not rest.startswith("a=") or rest.startswith("a=,"):
        return None
    authzid, sep, bare = rest[2:].partition(",")
    if not sep:
        return None
    return f"{flag},,{bare}", authzid, f"{flag},a={authzid},"


class _SentGs2Header:
    """Stands for scramp's GS2 header once the authzid is taken out: the client-final's
    channel binding (``c=``) is the base64 of the header as the client sent it (no
    channel binding data: seglog's SCRAM has none)."""

    def __init__(self, header: str) -> None:
        self._header = header.encode()

    def make_cbind_input(self, channel_binding: object) -> bytes:
        """The bytes ``c=`` must encode."""
        del channel_binding
        return self._header


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
        authzid_raw, user_raw, password_raw = parts
        session.user = user_raw.decode(errors="replace")
        if store is None or not store.check_plain(
            session.user, password_raw.decode(errors="replace")
        ):
            return _fail(ctx, rctx, "Invalid username or password")
        if authzid_raw and authzid_raw != user_raw:
            return _fail(ctx, rctx, AUTHZID_MISMATCH)
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
            client_first = data.decode()
            with_authzid = _take_authzid(client_first)
            if with_authzid is None:
                server.set_client_first(client_first)
            else:
                without, authzid, header = with_authzid
                server.set_client_first(without)  # looks the user up first, as Kafka
                if _saslname(authzid) != _saslname(session.user or ""):
                    return _fail(ctx, rctx, AUTHZID_MISMATCH)
                server.gs2_header = _SentGs2Header(header)
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
