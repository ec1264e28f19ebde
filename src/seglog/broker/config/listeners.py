"""Listeners in Kafka's syntax: ``listeners``, ``advertised.listeners`` and
``listener.security.protocol.map``.

``PLAINTEXT://127.0.0.1:9092,SASL_SSL://0.0.0.0:9093`` names each listener by its security
protocol; a custom name (``CLIENTS://:9094``) needs an entry in the protocol map
(``CLIENTS:SASL_SSL``). An empty host binds every interface. Errors are ValueError with the
offending entry, as Kafka refuses to start on them.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

from seglog.broker.config.broker_config import BrokerConfig
from seglog.broker.config.settings import (
    DEFAULT_CONFIG,
    LIST,
    STATIC_BROKER_CONFIG,
    STRING,
    BrokerEntry,
)
from seglog.broker.protocol.address import split_host_port

__all__ = [
    "KAFKA_DEFAULT_PROTOCOL_MAP",
    "PROTOCOLS",
    "Listener",
    "configured_listeners",
    "listener_entries",
    "parse_listeners",
    "parse_protocol_map",
]

PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
KAFKA_DEFAULT_PROTOCOL_MAP = (
    "SASL_SSL:SASL_SSL,PLAINTEXT:PLAINTEXT,SSL:SSL,SASL_PLAINTEXT:SASL_PLAINTEXT"
)
"""Kafka's default ``listener.security.protocol.map`` (as its documentation prints it)."""


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
        host, port = split_host_port(address or ":9092")
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


def configured_listeners(config: BrokerConfig) -> tuple[Listener, ...]:
    """The listeners ``config`` asks for: ``config.listeners``, or one PLAINTEXT listener
    on ``host:port`` advertising ``advertised_host:advertised_port``."""
    return config.listeners or (
        Listener(
            "PLAINTEXT", "PLAINTEXT", config.host, config.port,
            config.advertised_host, config.advertised_port,
        ),
    )  # fmt: skip


def _endpoint(name: str, host: str, port: int) -> str:
    return f"{name}://[{host}]:{port}" if ":" in host else f"{name}://{host}:{port}"


def listener_entries(config: BrokerConfig, bound: Sequence[Listener]) -> list[BrokerEntry]:
    """DescribeConfigs' entries for ``listeners``, ``advertised.listeners`` and
    ``listener.security.protocol.map`` (Kafka's names and types, not sensitive).

    ``bound``: the running listeners with their bound port (``port`` 0 asked for any
    free one) and the address clients are given (``advertised_host``/``_port``). Values
    are ``NAME://HOST:PORT`` lists. Sources: ``listeners`` is STATIC_BROKER_CONFIG unless
    seglog's default (one PLAINTEXT listener on 127.0.0.1:9092) is used;
    ``advertised.listeners`` is STATIC_BROKER_CONFIG when an advertised address was
    given, else DEFAULT_CONFIG with the addresses clients are given (Kafka: "if this is
    not set, the value for listeners will be used"); the protocol map is Kafka's default
    (DEFAULT_CONFIG), plus ``NAME:PROTOCOL`` for each listener with a name of its own
    (STATIC_BROKER_CONFIG)."""
    asked = configured_listeners(config)
    defaults = {f.name: f.default for f in dataclasses.fields(BrokerConfig)}
    default_listener = config.listeners is None and (config.host, config.port) == (
        defaults["host"],
        defaults["port"],
    )
    advertised_given = any(
        lst.advertised_host is not None or lst.advertised_port is not None for lst in asked
    )
    custom = [f"{lst.name}:{lst.protocol}" for lst in bound if lst.name not in PROTOCOLS]
    listening = [_endpoint(lst.name, lst.host, lst.port) for lst in bound]
    advertised = [
        _endpoint(lst.name, lst.advertised_host or lst.host, lst.advertised_port or lst.port)
        for lst in bound
    ]
    static, default = STATIC_BROKER_CONFIG, DEFAULT_CONFIG
    return [
        BrokerEntry(
            "listeners", LIST,
            ",".join(listening),
            default if default_listener else static,
            "The addresses this broker listens on, by listener name (the bound ports).", False,
        ),
        BrokerEntry(
            "advertised.listeners", LIST,
            ",".join(advertised),
            static if advertised_given else default,
            "The addresses clients are given in Metadata, by listener name.", False,
        ),
        BrokerEntry(
            "listener.security.protocol.map", STRING,
            ",".join([KAFKA_DEFAULT_PROTOCOL_MAP, *custom]),
            static if custom else default,
            "The security protocol of each listener name.", False,
        ),
    ]  # fmt: skip
