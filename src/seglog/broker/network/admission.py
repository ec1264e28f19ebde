"""Which connections the broker takes: ``max.connections``, ``max.connections.per.ip``
and its overrides, and the connection quotas of KIP-612 (``connection_creation_rate``
of ip entities, the broker-wide ``max.connection.creation.rate``).

A connection over a count limit or from an address over its creation rate is closed at
once (Kafka closes it too; the address's further connections are closed for the throttle
time). A connection past the broker-wide creation rate is taken but not read from until
the rate allows (Kafka's acceptor waits before accepting). Refusals are logged at the
1st, 2nd, 4th, 8th... one, so a flood cannot flood the log.
"""

from __future__ import annotations

import logging

from seglog.broker.config.broker_config import BrokerConfig
from seglog.broker.config.settings import parse_ip_overrides
from seglog.broker.network.connection import Connection
from seglog.broker.security.throttling import ConnectionRates

__all__ = ["ConnectionLimits"]

log = logging.getLogger("seglog.broker")


class ConnectionLimits:
    """The open (admitted) connections, counted in total and per address."""

    def __init__(self, config: BrokerConfig) -> None:
        self.config = config
        self.connections: set[Connection] = set()
        self._per_host: dict[str, int] = {}
        self._overrides = parse_ip_overrides(config.max_connections_per_ip_overrides)
        self.rates: ConnectionRates | None = None
        """The creation rates (set when the broker starts; None refuses everything)."""
        self.refused = 0

    def limit_of(self, host: str) -> int:
        """How many connections ``host`` may hold: its override, else
        ``max.connections.per.ip`` (by default 3/4 of ``max.connections``)."""
        return self._overrides.get(host, self.config.connections_per_ip)

    def _refusal(self, host: str, shutting_down: bool) -> str | None:
        config, rates = self.config, self.rates
        if shutting_down or rates is None:
            return "shutting down"
        if len(self.connections) >= config.max_connections:
            return f"max.connections {config.max_connections} reached"
        per_ip = self.limit_of(host)
        if self._per_host.get(host, 0) >= per_ip:
            return f"max.connections.per.ip {per_ip} reached for {host}"
        throttle = rates.ip_throttle_ms(host)
        if throttle > 0:
            return f"connection_creation_rate quota of {host} exceeded ({throttle} ms)"
        return None

    def admit(self, conn: Connection, *, shutting_down: bool) -> bool:
        """Count ``conn`` (and hold it past the broker-wide creation rate), or say why not
        in the log and return False (the caller closes it)."""
        host = conn.peer_host
        reason = self._refusal(host, shutting_down)
        if reason is not None:
            self.refused += 1
            if self.refused & (self.refused - 1) == 0:
                log.warning(
                    "refusing connection from %s: %s (%d refused so far)",
                    conn.peer,
                    reason,
                    self.refused,
                )
            return False
        self.connections.add(conn)
        self._per_host[host] = self._per_host.get(host, 0) + 1
        if self.rates is not None:
            conn.mute(self.rates.broker_delay_ms())  # max.connection.creation.rate
        return True

    def closed(self, conn: Connection) -> None:
        """``conn`` is gone (nothing to do for a refused one: never counted)."""
        if conn not in self.connections:
            return
        self.connections.discard(conn)
        host = conn.peer_host
        left = self._per_host.get(host, 0) - 1
        if left > 0:
            self._per_host[host] = left
        else:
            self._per_host.pop(host, None)
