"""A connection's authentication state: who it is (the principal) and where it stands in
its SASL exchange and session (KIP-368 re-authentication).

The network layer creates one :class:`Session` per connection (its principal from the TLS
client certificate when there is one); the SASL APIs (``apis/sasl.py``) move it through
SaslHandshake and SaslAuthenticate; the dispatcher reads it to refuse requests the session
does not allow. Times are the event loop's clock, in seconds."""

from __future__ import annotations

import dataclasses
from typing import Any

__all__ = ["ANONYMOUS", "SaslExchange", "Session"]

ANONYMOUS = "User:ANONYMOUS"
"""Kafka's principal before (or without) authentication."""


@dataclasses.dataclass
class SaslExchange:
    """One SaslHandshake + SaslAuthenticate exchange in progress (``reauth``: of an
    authenticated connection, KIP-368)."""

    mechanism: str | None = None
    scram: Any = None
    """scramp's ``ScramServer`` between the two SCRAM messages."""
    user: str | None = None
    reauth: bool = False


@dataclasses.dataclass
class Session:
    """The authentication state of one connection.

    ``authenticated`` is False on a SASL listener until SaslAuthenticate succeeds (then
    only ApiVersions, SaslHandshake and SaslAuthenticate are served); ``mechanism`` is the
    one it authenticated with; ``expires`` the loop time its session ends
    (``connections.max.reauth.ms``; None: never); ``reauth_started`` the loop time of its
    last re-authentication (at most one a second)."""

    principal: str = ANONYMOUS
    authenticated: bool = True
    exchange: SaslExchange | None = None
    mechanism: str | None = None
    expires: float | None = None
    reauth_started: float | None = None

    @property
    def checked(self) -> bool:
        """Whether requests must be checked against the session (an exchange is under way
        or the session can expire)."""
        return self.exchange is not None or self.expires is not None
