"""What every client command shares: the broker list, security options, ``-X`` passthrough,
and one rule for Kafka errors (exit 1).

The client commands (produce, consume, topic, group, cluster) talk the Kafka protocol
through confluent-kafka (librdkafka), so they work against ``seglog serve`` and any Kafka
broker. Options map to librdkafka's configuration names (which are Kafka's client config
names): ``-b`` is ``bootstrap.servers``, ``--security-protocol`` is ``security.protocol``,
and ``-X key=value`` sets any other property.

Exit codes of the client commands: 0 done; 1 the broker answered an error, a request
timed out or a delivery failed; 2 bad usage (typer's own, and bad option values).
"""

from __future__ import annotations

import functools
import inspect
import typing
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Annotated, Any, TypeVar

import typer

from seglog.cli._client_config import ClientOptions, print_json
from seglog.cli._fail import fail

__all__ = [
    "Brokers",
    "ClientOptions",
    "ExtraConfig",
    "JsonOut",
    "SaslMechanism",
    "SaslPassword",
    "SaslUsername",
    "SecurityProtocol",
    "SslCaLocation",
    "Timeout",
    "client_command",
    "fail",
    "kafka_errors_exit_1",
    "options_command",
    "print_json",
    "wire_call",
]

_SECURITY = "Security (Kafka's client config names)"

Brokers = Annotated[
    str | None,
    typer.Option(
        "-b",
        "--brokers",
        "--bootstrap-server",
        help="bootstrap.servers: HOST:PORT[,...] (default: $SEGLOG_BROKERS or 127.0.0.1:9092)",
    ),
]
ExtraConfig = Annotated[
    list[str] | None,
    typer.Option(
        "-X",
        help="Any client property as key=value (librdkafka/Kafka names), repeatable.",
        rich_help_panel=_SECURITY,
    ),
]
SecurityProtocol = Annotated[
    str | None,
    typer.Option(
        "--security-protocol",
        help="security.protocol: PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL.",
        rich_help_panel=_SECURITY,
    ),
]
SaslMechanism = Annotated[
    str | None,
    typer.Option(
        "--sasl-mechanism",
        help="sasl.mechanism: PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512.",
        rich_help_panel=_SECURITY,
    ),
]
SaslUsername = Annotated[
    str | None,
    typer.Option("--sasl-username", help="sasl.username.", rich_help_panel=_SECURITY),
]
SaslPassword = Annotated[
    str | None,
    typer.Option(
        "--sasl-password",
        envvar="SEGLOG_SASL_PASSWORD",
        help="sasl.password (or $SEGLOG_SASL_PASSWORD).",
        rich_help_panel=_SECURITY,
    ),
]
SslCaLocation = Annotated[
    str | None,
    typer.Option(
        "--ssl-ca-location",
        help="ssl.ca.location: PEM file of the CA that signed the broker's certificate.",
        rich_help_panel=_SECURITY,
    ),
]
JsonOut = Annotated[bool, typer.Option("--json", help="Machine-readable JSON instead of tables.")]
Timeout = Annotated[
    float, typer.Option("--timeout", help="Seconds to wait for each broker request.")
]

_OPTION_PARAMS = {
    "brokers": Brokers,
    "extra": ExtraConfig,
    "security_protocol": SecurityProtocol,
    "sasl_mechanism": SaslMechanism,
    "sasl_username": SaslUsername,
    "sasl_password": SaslPassword,
    "ssl_ca_location": SslCaLocation,
}

_F = TypeVar("_F", bound=Callable[..., Any])


def client_command(func: _F) -> _F:
    """Give a command the shared connection options. ``func`` takes a keyword-only
    ``client: ClientOptions``; the wrapper's signature (what typer reads) replaces it with
    ``-b``, ``-X``, ``--security-protocol``, ``--sasl-*`` and ``--ssl-ca-location``."""

    def make(**options: Any) -> ClientOptions:
        options["extra"] = tuple(options["extra"] or ())
        return ClientOptions(**options)

    return options_command(func, {name: (ann, None) for name, ann in _OPTION_PARAMS.items()}, make)


def options_command(func: _F, options: dict[str, tuple[Any, Any]], make: Callable[..., Any]) -> _F:
    """``func`` with its keyword-only ``client`` parameter replaced, in the signature typer
    reads, by keyword-only ``options`` (name -> (Annotated type, default)); each call
    passes ``client=make(**those options' values)``."""
    sig = inspect.signature(func)
    hints = typing.get_type_hints(func, include_extras=True)
    params = [
        p.replace(annotation=hints.get(p.name, p.annotation))  # evaluated: typer reads these
        for p in sig.parameters.values()
        if p.name != "client"
    ]
    params += [
        inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY, default=default, annotation=ann)
        for name, (ann, default) in options.items()
    ]

    @functools.wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        values = {name: kwargs.pop(name, default) for name, (_, default) in options.items()}
        return func(*args, client=make(**values), **kwargs)

    wrapper.__signature__ = sig.replace(parameters=params)  # type: ignore[attr-defined]
    wrapper.__annotations__ = {
        **{k: v for k, v in hints.items() if k != "client"},
        **{name: ann for name, (ann, _) in options.items()},
    }
    return wrapper  # type: ignore[return-value]


def admin_client(client: ClientOptions) -> Any:
    """A confluent-kafka AdminClient for these options. Keep it in a variable until its
    futures resolve (a temporary one is destroyed first). Describing a topic never creates
    it (librdkafka's admin handles auto-create topics by default)."""
    from confluent_kafka.admin import AdminClient  # noqa: PLC0415 - only client commands

    return AdminClient(client.config(**{"allow.auto.create.topics": False}))


@contextmanager
def kafka_errors_exit_1() -> Iterator[None]:
    """Turn a KafkaException (or a timeout waiting on a broker) into ``error: ...`` on
    stderr and exit code 1."""
    from confluent_kafka import KafkaException  # noqa: PLC0415 - only client commands

    try:
        yield
    except KafkaException as exc:
        err = exc.args[0] if exc.args else exc
        text = err.str() if hasattr(err, "str") else str(err)
        raise fail(text) from None
    except TimeoutError:
        raise fail("timed out waiting for the broker") from None


def wire_call(client: ClientOptions, request: Any, client_id: str, timeout: float) -> Any:
    """Send one request to the first bootstrap server over seglog's blocking wire client
    (``seglog.broker.KafkaConnection``, TLS and SASL from the client options) and return
    its response; connection, TLS, SASL or protocol trouble exits 1 with one line."""
    from seglog.broker import ClientSecurity, KafkaConnection, split_host_port  # noqa: PLC0415

    conf = {k: str(v) for k, v in client.config().items()}
    host, port = split_host_port(conf["bootstrap.servers"].split(",")[0].strip())
    try:
        with KafkaConnection(host, port, client_id, timeout, ClientSecurity(conf)) as conn:
            return conn.call(request)
    except Exception as exc:  # connection, TLS, SASL or protocol trouble: one line
        raise fail(f"{host}:{port}: {exc}") from None
