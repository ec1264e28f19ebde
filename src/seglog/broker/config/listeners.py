"""Listeners in Kafka's syntax: ``listeners``, ``advertised.listeners`` and
``listener.security.protocol.map``.

``PLAINTEXT://127.0.0.1:9092,SASL_SSL://0.0.0.0:9093`` names each listener by its security
protocol; a custom name (``CLIENTS://:9094``) needs an entry in the protocol map
(``CLIENTS:SASL_SSL``). An empty host binds every interface. Errors are ValueError with the
offending entry, as Kafka refuses to start on them.
"""

from __future__ import annotations

import dataclasses

from seglog.broker.config.broker_config import parse_host_port

__all__ = ["PROTOCOLS", "Listener", "parse_listeners", "parse_protocol_map"]

PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")


@dataclasses.dataclass(frozen=True)
class Listener:
    """One listener: its name, security protocol, bind address and the address clients
    are given in Metadata (``advertised_*``: None = the bound address)."""

    name: str
    protocol: str
    host: str
    port: int
    advertised_host: str | None = None
    advertised_port: int | None = None

    @property
    def tls(self) -> bool:
        """TLS on the socket (SSL, SASL_SSL)."""
        return self.protocol in ("SSL", "SASL_SSL")

    @property
    def sasl(self) -> bool:
        """SASL authentication before any other request (SASL_PLAINTEXT, SASL_SSL)."""
        return self.protocol.startswith("SASL_")


def parse_protocol_map(text: str | None) -> dict[str, str]:
    """``NAME:PROTOCOL,...`` → {name: protocol}; the four protocols map to themselves."""
    out = {p: p for p in PROTOCOLS}
    for raw in (text or "").split(","):
        item = raw.strip()
        if not item:
            continue
        name, sep, proto = item.partition(":")
        if not sep or proto.strip().upper() not in PROTOCOLS:
            raise ValueError(
                f"listener.security.protocol.map entry {item!r}: NAME:{'|'.join(PROTOCOLS)}"
            )
        out[name.strip().upper()] = proto.strip().upper()
    return out


def _entries(text: str) -> list[tuple[str, str, int]]:
    out = []
    for raw in text.split(","):
        item = raw.strip()
        if not item:
            continue
        name, sep, address = item.partition("://")
        if not sep:
            raise ValueError(f"listener {item!r}: expected NAME://HOST:PORT")
        host, port = parse_host_port(address or ":9092")
        out.append((name.strip().upper(), host if address.split(":")[0] else "0.0.0.0", port))
    if not out:
        raise ValueError("no listener given")
    return out


def parse_listeners(
    listeners: str, advertised: str | None = None, protocol_map: str | None = None
) -> tuple[Listener, ...]:
    """Parse ``listeners`` (and ``advertised.listeners``, matched by name). Raises
    ValueError on a bad entry, an unknown name, or a name or port used twice."""
    protocols = parse_protocol_map(protocol_map)
    bound = _entries(listeners)
    names = [n for n, _h, _p in bound]
    if len(set(names)) != len(names):
        raise ValueError(f"listener names must be unique: {names}")
    ports = [p for _n, _h, p in bound if p != 0]
    if len(set(ports)) != len(ports):
        raise ValueError(f"listener ports must be unique: {ports}")
    adv = {n: (h, p) for n, h, p in _entries(advertised)} if advertised else {}
    for name in adv:
        if name not in names:
            raise ValueError(f"advertised listener {name} is not among the listeners {names}")
    out = []
    for name, host, port in bound:
        if name not in protocols:
            raise ValueError(f"listener {name}: not in listener.security.protocol.map")
        a_host, a_port = adv.get(name, (None, None))
        out.append(Listener(name, protocols[name], host, port, a_host, a_port))
    return tuple(out)
