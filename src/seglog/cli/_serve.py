"""``seglog serve``: run the Kafka-wire broker over a data directory."""

from __future__ import annotations

import inspect
import logging
import threading
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Annotated, Any

import typer

from seglog.broker import (
    BOOLEAN,
    BROKER_SETTINGS,
    BrokerConfig,
    BrokerSetting,
    parse_listeners,
    run_broker,
    split_host_port,
)
from seglog.cli._json_log import JsonFormatter
from seglog.cli._properties import load_server_properties
from seglog.errors import DataDirLockedError

__all__ = ["register", "serve"]

_LOG_CRITICAL = 2  # librdkafka's log_level (syslog severities): critical and worse


_SEC = "Security (listeners, TLS, SASL)"


def _parser(setting: BrokerSetting) -> Callable[[Any], Any]:
    """A table setting's flag parser: its text parsed and validated by the table, so a
    flag and a properties key fail alike (``log.segment.bytes=10: below the minimum
    1024``). A default or a properties file's value arrives parsed: it is validated."""

    def parse(value: Any) -> Any:
        try:
            if isinstance(value, str):
                return setting.parse(value)
            setting.validate(value)
        except ValueError as exc:  # as BadParameter: no "Value error, " prefix
            raise typer.BadParameter(str(exc)) from None
        return value

    return parse


def _help(setting: BrokerSetting) -> str:
    limits = []
    if setting.min is not None:
        limits.append(f">= {setting.min}")
    if setting.max is not None:
        limits.append(f"<= {setting.max}")
    if setting.choices:
        limits.append(" | ".join(setting.choices))
    bounds = f" [{', '.join(limits)}]" if limits else ""
    return f"{setting.doc} ({setting.name}){bounds}"


_ANNOTATED: Any = Annotated  # built at run time from the table


def _setting_param(setting: BrokerSetting) -> inspect.Parameter:
    """The ``seglog serve`` option of one table row: ``--log-segment-bytes``, or
    ``--auto-create-topics-enable/--no-auto-create-topics-enable`` for a boolean."""
    if setting.type == BOOLEAN:
        stem = setting.flag.removeprefix("--")
        info = typer.Option(
            f"--{stem}/--no-{stem}", help=_help(setting), rich_help_panel=setting.panel
        )
        annotation = _ANNOTATED[bool, info]
    else:
        info = typer.Option(
            setting.flag,
            parser=_parser(setting),
            metavar="<int>" if setting.python_type is int else "<str>",
            help=_help(setting),
            rich_help_panel=setting.panel,
        )
        kind: Any = setting.python_type
        annotation = _ANNOTATED[kind | None if setting.default is None else kind, info]
    return inspect.Parameter(
        setting.param,
        inspect.Parameter.KEYWORD_ONLY,
        default=setting.default,
        annotation=annotation,
    )


def _serve(  # noqa: PLR0917 (typer maps each parameter to a CLI option)
    config_file: Annotated[
        Path | None,
        typer.Option(
            "--config",
            help="Kafka's server.properties: known keys become defaults; flags win.",
            is_eager=True,
            callback=load_server_properties,
        ),
    ] = None,
    data_dir: Annotated[
        Path, typer.Option("--data-dir", help="Data directory (created when missing; log.dirs).")
    ] = Path("data"),
    listen: Annotated[
        str, typer.Option("--listen", help="HOST:PORT to bind (port 0: any free port).")
    ] = "127.0.0.1:9092",
    advertised_listener: Annotated[
        str | None,
        typer.Option(
            "--advertised-listener",
            help="HOST:PORT given to clients in Metadata (default: the bound address).",
        ),
    ] = None,
    listeners: Annotated[
        str | None,
        typer.Option(
            "--listeners",
            help="Kafka's listeners, e.g. PLAINTEXT://127.0.0.1:9092,SASL_SSL://0.0.0.0:9093"
            " (replaces --listen).",
            rich_help_panel=_SEC,
        ),
    ] = None,
    advertised_listeners: Annotated[
        str | None,
        typer.Option(
            "--advertised-listeners",
            help="Addresses given to clients per listener name (NAME://HOST:PORT,...).",
            rich_help_panel=_SEC,
        ),
    ] = None,
    listener_security_protocol_map: Annotated[
        str | None,
        typer.Option(
            "--listener-security-protocol-map",
            help="NAME:PROTOCOL,... for listener names other than the protocols.",
            rich_help_panel=_SEC,
        ),
    ] = None,
    ssl_certfile: Annotated[
        Path | None,
        typer.Option(
            "--ssl-certfile",
            help="PEM certificate chain of TLS listeners.",
            rich_help_panel=_SEC,
        ),
    ] = None,
    ssl_keyfile: Annotated[
        Path | None,
        typer.Option(
            "--ssl-keyfile",
            help="PEM private key (if not in the certfile).",
            rich_help_panel=_SEC,
        ),
    ] = None,
    ssl_cafile: Annotated[
        Path | None,
        typer.Option(
            "--ssl-cafile",
            help="PEM CAs that sign client certificates.",
            rich_help_panel=_SEC,
        ),
    ] = None,
    sasl_enabled_mechanisms: Annotated[
        str,
        typer.Option(
            "--sasl-enabled-mechanisms",
            help="sasl.enabled.mechanisms (users: seglog user add).",
            rich_help_panel=_SEC,
        ),
    ] = "PLAIN,SCRAM-SHA-256,SCRAM-SHA-512",
    super_users: Annotated[
        str | None,
        typer.Option(
            "--super-users",
            help="super.users: User:NAME;User:OTHER (never denied).",
            rich_help_panel=_SEC,
        ),
    ] = None,
    console_listen: Annotated[
        str | None,
        typer.Option(
            "--console-listen",
            help="HOST:PORT to serve the web console on (needs seglog[console]; off by default).",
        ),
    ] = None,
    metrics_listen: Annotated[
        str | None,
        typer.Option(
            "--metrics-listen",
            help="HOST:PORT to serve Prometheus metrics on (/metrics; default: off).",
        ),
    ] = None,
    schema_registry_listen: Annotated[
        str | None,
        typer.Option(
            "--schema-registry-listen",
            help="HOST:PORT to serve Confluent Schema Registry's REST API on (the "
            "_schemas topic; HTTPS and Basic auth follow the listeners; default: off).",
        ),
    ] = None,
    log_level: Annotated[str, typer.Option("--log-level", help="Python logging level.")] = "INFO",
    log_format: Annotated[
        str,
        typer.Option(
            "--log-format", help="text, or json: one JSON object per line (ts, level, logger, msg)."
        ),
    ] = "text",
    *,
    settings: Mapping[str, Any],
) -> None:
    """Run a single-node Kafka-compatible broker until SIGINT/SIGTERM (then exit 0).

    Every ``BROKER_SETTINGS`` row is an option too (``serve`` below adds them), its value
    in ``settings`` by BrokerConfig field."""
    del config_file  # applied by its callback: the file's keys are the other options' defaults
    if log_format not in ("text", "json"):
        raise typer.BadParameter(f"--log-format {log_format!r}: text or json")
    handler = logging.StreamHandler()
    handler.setFormatter(
        JsonFormatter()
        if log_format == "json"
        else logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s")
    )
    logging.basicConfig(level=log_level.upper(), handlers=[handler])
    try:
        host, port = split_host_port(listen)
        adv_host, adv_port = (
            split_host_port(advertised_listener) if advertised_listener else (None, None)
        )
        parsed_listeners = (
            parse_listeners(listeners, advertised_listeners, listener_security_protocol_map)
            if listeners
            else None
        )
        mechanisms = tuple(
            m.strip().upper() for m in sasl_enabled_mechanisms.split(",") if m.strip()
        )
        unknown = set(mechanisms) - {"PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"}
        if unknown:
            raise ValueError(f"--sasl-enabled-mechanisms: unknown {sorted(unknown)}")
        metrics_host, metrics_port = (
            split_host_port(metrics_listen, 0) if metrics_listen else (None, 0)
        )
        registry_host, registry_port = (
            split_host_port(schema_registry_listen, 8081) if schema_registry_listen else (None, 0)
        )
        config = BrokerConfig(
            **settings,
            schema_registry_host=registry_host,
            schema_registry_port=registry_port,
            listeners=parsed_listeners,
            ssl_certfile=ssl_certfile,
            ssl_keyfile=ssl_keyfile,
            ssl_cafile=ssl_cafile,
            sasl_enabled_mechanisms=mechanisms,
            super_users=tuple(u.strip() for u in (super_users or "").split(";") if u.strip()),
            metrics_host=metrics_host,
            metrics_port=metrics_port,
            data_dir=data_dir,
            host=host,
            port=port,
            advertised_host=adv_host,
            advertised_port=adv_port,
        )
    except ValueError as exc:
        raise typer.BadParameter(str(exc)) from exc
    start_console = _console_starter(config, console_listen) if console_listen else None
    try:
        run_broker(config, on_started=start_console)
    except DataDirLockedError as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(2) from exc
    except OSError as exc:
        typer.echo(f"error: {exc} (listen {listen}, data directory {data_dir})", err=True)
        raise typer.Exit(2) from exc
    except ValueError as exc:  # e.g. a TLS listener without a certificate
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(2) from exc


def _build_serve() -> Callable[..., None]:
    """``serve``: ``_serve``'s hand-written options plus one generated option per
    ``BROKER_SETTINGS`` row (typer reads the signature built here)."""
    hand = [
        p.replace(kind=inspect.Parameter.KEYWORD_ONLY)
        for p in inspect.signature(_serve, eval_str=True).parameters.values()
        if p.name != "settings"
    ]
    first = [p.name for p in hand].index("listeners")  # table options after the addresses
    params = [*hand[:first], *map(_setting_param, BROKER_SETTINGS), *hand[first:]]

    def serve(**options: Any) -> None:
        settings = {s.field: options.pop(s.param) for s in BROKER_SETTINGS}
        _serve(**options, settings=settings)

    serve.__doc__ = _serve.__doc__.split("\n\n")[0] if _serve.__doc__ else None
    serve.__dict__["__signature__"] = inspect.Signature(params, return_annotation=None)
    return serve


serve = _build_serve()


def _console_starter(config: BrokerConfig, listen: str) -> Callable[[], None]:
    """What starts the web console in a daemon thread once the broker listens, as a client
    of this broker's first listener (which needs a fixed port). Exit 2 when that is
    impossible (checked now, before the broker starts).

    Its librdkafka clients log only critical lines: their broker is this process, so a
    failed connection can only come from this process starting or stopping (connection
    refused at shutdown), and the console reports a failed request on its page."""
    try:
        from seglog.console import serve_console  # noqa: PLC0415
    except ImportError as exc:
        typer.echo(
            f"error: --console-listen needs: pip install 'seglog[console]' ({exc})", err=True
        )
        raise typer.Exit(2) from exc
    first = config.listeners[0] if config.listeners else None
    host, port = (first.host, first.port) if first else (config.host, config.port)
    if first is not None and first.protocol != "PLAINTEXT":
        typer.echo("error: --console-listen needs a PLAINTEXT first listener", err=True)
        raise typer.Exit(2)
    if port == 0:
        typer.echo("error: --console-listen needs a fixed broker port (not :0)", err=True)
        raise typer.Exit(2)
    try:
        c_host, c_port = split_host_port(listen, 8080)
    except ValueError as exc:
        raise typer.BadParameter(f"--console-listen {listen!r}: {exc}") from exc
    bootstrap = f"{'127.0.0.1' if host in ('', '0.0.0.0') else host}:{port}"
    conf = {"bootstrap.servers": bootstrap, "log_level": _LOG_CRITICAL}
    registry = None
    if config.schema_registry_host is not None and config.schema_registry_port:
        r_host = config.schema_registry_host
        scheme = "https" if config.ssl_certfile is not None else "http"
        registry = f"{scheme}://{'127.0.0.1' if r_host in ('', '0.0.0.0') else r_host}"
        registry += f":{config.schema_registry_port}"
    thread = threading.Thread(
        target=serve_console,
        args=(conf, c_host, c_port, time.time(), registry),
        name="seglog-console",
        daemon=True,
    )
    return thread.start


def register(app: typer.Typer) -> None:
    """Add the ``serve`` command to ``app``."""
    app.command("serve")(serve)
    if app.registered_callback is None:
        # typer runs an app with a single command and no callback as that command
        # (``seglog --data-dir ...``); a no-op callback keeps ``seglog serve`` a subcommand
        # while the other command modules are still empty.
        app.callback()(_group)


def _group() -> None:
    """seglog: a durable segmented commit log — embedded, Kafka-wire broker, PySpark source."""
