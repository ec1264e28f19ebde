"""``seglog serve``: run the Kafka-wire broker over a data directory."""

from __future__ import annotations

import logging
import threading
import time
from pathlib import Path
from typing import Annotated

import typer

from seglog.broker import (
    BrokerConfig,
    parse_host_port,
    parse_listeners,
    run_broker,
)
from seglog.cli._json_log import JsonFormatter
from seglog.cli._properties import load_server_properties
from seglog.errors import DataDirLockedError

__all__ = ["register"]


_SEC = "Security (listeners, TLS, SASL)"


def serve(  # noqa: PLR0917 (typer maps each parameter to a CLI option)
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
        Path, typer.Option("--data-dir", help="Data directory (created when missing).")
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
    num_partitions: Annotated[
        int, typer.Option("--num-partitions", min=1, help="Partitions of auto-created topics.")
    ] = 1,
    auto_create_topics_enable: Annotated[
        bool,
        typer.Option(
            "--auto-create-topics-enable/--no-auto-create-topics-enable",
            help="Create a topic on first use (Metadata), as Kafka does by default.",
        ),
    ] = True,
    log_segment_bytes: Annotated[
        int, typer.Option("--log-segment-bytes", min=1024, help="Segment size before a roll.")
    ] = 1 << 30,
    log_flush_interval_messages: Annotated[
        int | None,
        typer.Option(
            "--log-flush-interval-messages",
            min=1,
            help="fsync every N messages in the background and answer produces at once "
            "(default: answer acks=1/all only after fsync).",
        ),
    ] = None,
    log_flush_interval_ms: Annotated[
        int | None,
        typer.Option(
            "--log-flush-interval-ms",
            min=1,
            help="fsync at least every T ms in the background (relaxes the default policy).",
        ),
    ] = None,
    message_max_bytes: Annotated[
        int, typer.Option("--message-max-bytes", min=64, help="Largest record batch (bytes).")
    ] = 1048588,
    socket_request_max_bytes: Annotated[
        int,
        typer.Option("--socket-request-max-bytes", min=1024, help="Largest request frame (bytes)."),
    ] = 100 * 1024 * 1024,
    max_connections: Annotated[
        int,
        typer.Option(
            "--max-connections",
            min=1,
            help="Most client connections at once; more are closed at accept (max.connections).",
        ),
    ] = 1000,
    max_connections_per_ip: Annotated[
        int,
        typer.Option(
            "--max-connections-per-ip",
            min=1,
            help="Most connections from one IP address (max.connections.per.ip).",
        ),
    ] = 1000,
    connections_max_idle_ms: Annotated[
        int,
        typer.Option(
            "--connections-max-idle-ms",
            min=0,
            help="Close connections idle this long, in ms; 0: never (connections.max.idle.ms).",
        ),
    ] = 10 * 60 * 1000,
    queued_max_requests: Annotated[
        int,
        typer.Option(
            "--queued-max-requests",
            min=1,
            help="Requests in flight per connection before reading from it pauses "
            "(queued.max.requests).",
        ),
    ] = 256,
    log_retention_ms: Annotated[
        int,
        typer.Option(
            "--log-retention-ms",
            min=-1,
            help="Remove closed segments whose newest record is older, in ms; -1: never "
            "(log.retention.ms; topic config retention.ms overrides).",
        ),
    ] = 7 * 24 * 3600 * 1000,
    log_retention_bytes: Annotated[
        int,
        typer.Option(
            "--log-retention-bytes",
            min=-1,
            help="Remove the oldest closed segments while a partition is larger, in bytes; "
            "-1: no limit (log.retention.bytes).",
        ),
    ] = -1,
    log_cleanup_policy: Annotated[
        str,
        typer.Option(
            "--log-cleanup-policy",
            help="delete, compact or compact,delete (log.cleanup.policy; topic config "
            "cleanup.policy overrides).",
        ),
    ] = "delete",
    log_retention_check_interval_ms: Annotated[
        int,
        typer.Option(
            "--log-retention-check-interval-ms",
            min=1,
            help="How often retention and compaction run, in ms (log.retention.check.interval.ms).",
        ),
    ] = 5 * 60 * 1000,
    log_cleaner_delete_retention_ms: Annotated[
        int,
        typer.Option(
            "--log-cleaner-delete-retention-ms",
            min=0,
            help="How long tombstones stay in compacted topics, in ms "
            "(log.cleaner.delete.retention.ms).",
        ),
    ] = 24 * 3600 * 1000,
    log_cleaner_min_compaction_lag_ms: Annotated[
        int,
        typer.Option(
            "--log-cleaner-min-compaction-lag-ms",
            min=0,
            help="Segments younger than this are not compacted, in ms "
            "(log.cleaner.min.compaction.lag.ms).",
        ),
    ] = 0,
    log_archive_command: Annotated[
        str | None,
        typer.Option(
            "--log-archive-command",
            help="Command run as 'COMMAND TOPIC PARTITION FILE...' with a segment's files "
            "renamed to .bak before retention removes it; it owns them afterwards.",
        ),
    ] = None,
    group_initial_rebalance_delay_ms: Annotated[
        int,
        typer.Option(
            "--group-initial-rebalance-delay-ms",
            min=0,
            help="How long the first rebalance of an empty consumer group waits for more "
            "members, in ms (group.initial.rebalance.delay.ms).",
        ),
    ] = 100,
    group_min_session_timeout_ms: Annotated[
        int,
        typer.Option(
            "--group-min-session-timeout-ms",
            min=1,
            help="Smallest consumer session timeout accepted, in ms "
            "(group.min.session.timeout.ms).",
        ),
    ] = 6000,
    group_max_session_timeout_ms: Annotated[
        int,
        typer.Option(
            "--group-max-session-timeout-ms",
            min=1,
            help="Largest consumer session timeout accepted, in ms (group.max.session.timeout.ms).",
        ),
    ] = 1_800_000,
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
    ssl_client_auth: Annotated[
        str,
        typer.Option(
            "--ssl-client-auth",
            help="ssl.client.auth: required, requested or none.",
            rich_help_panel=_SEC,
        ),
    ] = "none",
    sasl_enabled_mechanisms: Annotated[
        str,
        typer.Option(
            "--sasl-enabled-mechanisms",
            help="sasl.enabled.mechanisms (users: seglog user add).",
            rich_help_panel=_SEC,
        ),
    ] = "PLAIN,SCRAM-SHA-256,SCRAM-SHA-512",
    partial_request_timeout_ms: Annotated[
        int,
        typer.Option(
            "--partial-request-timeout-ms",
            min=0,
            help="Close a connection whose started request is not whole after this many ms"
            " (0: never).",
        ),
    ] = 30_000,
    sasl_authentication_timeout_ms: Annotated[
        int,
        typer.Option(
            "--sasl-authentication-timeout-ms",
            min=0,
            help="Close a SASL connection not authenticated after this many ms (0: never).",
            rich_help_panel=_SEC,
        ),
    ] = 10_000,
    connections_max_reauth_ms: Annotated[
        int,
        typer.Option(
            "--connections-max-reauth-ms",
            min=0,
            help="SASL sessions last this many ms: clients re-authenticate (KIP-368) or"
            " are disconnected at their next request; 0: never (connections.max.reauth.ms).",
            rich_help_panel=_SEC,
        ),
    ] = 0,
    authorizer_class_name: Annotated[
        str | None,
        typer.Option(
            "--authorizer-class-name",
            help="authorizer.class.name: any value (e.g. StandardAuthorizer) turns ACLs on.",
            rich_help_panel=_SEC,
        ),
    ] = None,
    super_users: Annotated[
        str | None,
        typer.Option(
            "--super-users",
            help="super.users: User:NAME;User:OTHER (never denied).",
            rich_help_panel=_SEC,
        ),
    ] = None,
    allow_everyone_if_no_acl_found: Annotated[
        bool,
        typer.Option(
            "--allow-everyone-if-no-acl-found/--no-allow-everyone-if-no-acl-found",
            help="allow.everyone.if.no.acl.found: allow access to resources without ACLs.",
            rich_help_panel=_SEC,
        ),
    ] = False,
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
    log_level: Annotated[str, typer.Option("--log-level", help="Python logging level.")] = "INFO",
    log_format: Annotated[
        str,
        typer.Option(
            "--log-format", help="text, or json: one JSON object per line (ts, level, logger, msg)."
        ),
    ] = "text",
) -> None:
    """Run a single-node Kafka-compatible broker until SIGINT/SIGTERM (then exit 0)."""
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
    parts = {p.strip() for p in log_cleanup_policy.split(",")}
    if not parts or not parts <= {"delete", "compact"}:
        raise typer.BadParameter(f"--log-cleanup-policy {log_cleanup_policy!r}")
    try:
        host, port = parse_host_port(listen)
        adv_host, adv_port = (
            parse_host_port(advertised_listener) if advertised_listener else (None, None)
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
            parse_host_port(metrics_listen, 0) if metrics_listen else (None, 0)
        )
    except ValueError as exc:
        raise typer.BadParameter(str(exc)) from exc
    config = BrokerConfig(
        listeners=parsed_listeners,
        ssl_certfile=ssl_certfile,
        ssl_keyfile=ssl_keyfile,
        ssl_cafile=ssl_cafile,
        ssl_client_auth=ssl_client_auth,
        sasl_enabled_mechanisms=mechanisms,
        authorizer_class_name=authorizer_class_name or None,
        partial_request_timeout_ms=partial_request_timeout_ms,
        sasl_authentication_timeout_ms=sasl_authentication_timeout_ms,
        connections_max_reauth_ms=connections_max_reauth_ms,
        super_users=tuple(u.strip() for u in (super_users or "").split(";") if u.strip()),
        allow_everyone_if_no_acl_found=allow_everyone_if_no_acl_found,
        metrics_host=metrics_host,
        metrics_port=metrics_port,
        data_dir=data_dir,
        host=host,
        port=port,
        advertised_host=adv_host,
        advertised_port=adv_port,
        num_partitions=num_partitions,
        auto_create_topics_enable=auto_create_topics_enable,
        log_segment_bytes=log_segment_bytes,
        log_flush_interval_messages=log_flush_interval_messages,
        log_flush_interval_ms=log_flush_interval_ms,
        message_max_bytes=message_max_bytes,
        socket_request_max_bytes=socket_request_max_bytes,
        max_inflight_requests=queued_max_requests,
        max_connections=max_connections,
        max_connections_per_ip=max_connections_per_ip,
        connections_max_idle_ms=connections_max_idle_ms,
        log_retention_ms=log_retention_ms,
        log_retention_bytes=log_retention_bytes,
        log_cleanup_policy=log_cleanup_policy,
        log_retention_check_interval_ms=log_retention_check_interval_ms,
        log_cleaner_delete_retention_ms=log_cleaner_delete_retention_ms,
        log_cleaner_min_compaction_lag_ms=log_cleaner_min_compaction_lag_ms,
        log_archive_command=log_archive_command,
        group_initial_rebalance_delay_ms=group_initial_rebalance_delay_ms,
        group_min_session_timeout_ms=group_min_session_timeout_ms,
        group_max_session_timeout_ms=group_max_session_timeout_ms,
    )
    if console_listen is not None:
        _start_console(config, console_listen)
    try:
        run_broker(config)
    except DataDirLockedError as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(2) from exc
    except OSError as exc:
        typer.echo(f"error: {exc} (listen {listen}, data directory {data_dir})", err=True)
        raise typer.Exit(2) from exc
    except ValueError as exc:  # e.g. a TLS listener without a certificate
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(2) from exc


def _start_console(config: BrokerConfig, listen: str) -> None:
    """Run the web console in a daemon thread, as a client of this broker's first
    listener (which needs a fixed port). Exit 2 when that is impossible."""
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
        c_host, c_port = parse_host_port(listen, 8080)
    except ValueError as exc:
        raise typer.BadParameter(f"--console-listen {listen!r}: {exc}") from exc
    bootstrap = f"{'127.0.0.1' if host in ('', '0.0.0.0') else host}:{port}"
    threading.Thread(
        target=serve_console,
        args=({"bootstrap.servers": bootstrap}, c_host, c_port, time.time()),
        name="seglog-console",
        daemon=True,
    ).start()


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
