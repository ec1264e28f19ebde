"""Broker configuration: Kafka's broker config names, as ``seglog serve`` flags."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

__all__ = ["BrokerConfig", "parse_host_port"]


@dataclasses.dataclass(frozen=True)
class BrokerConfig:
    """Everything ``seglog serve`` needs; Kafka broker config names in comments.

    Sizes are bytes, times ms. ``port`` 0 binds a free port (the bound port is advertised).
    """

    data_dir: Path
    host: str = "127.0.0.1"
    port: int = 9092
    advertised_host: str | None = None  # advertised.listeners host (default: host)
    advertised_port: int | None = None  # advertised.listeners port (default: bound port)
    node_id: int = 0  # node.id: the single broker's id in Metadata / FindCoordinator
    num_partitions: int = 1  # num.partitions: partitions of an auto-created topic
    auto_create_topics_enable: bool = True  # auto.create.topics.enable
    log_segment_bytes: int = 1 << 30  # log.segment.bytes
    log_flush_interval_messages: int | None = None  # log.flush.interval.messages
    log_flush_interval_ms: int | None = None  # log.flush.interval.ms
    message_max_bytes: int = 1048588  # message.max.bytes: largest record batch
    socket_request_max_bytes: int = 100 * 1024 * 1024  # socket.request.max.bytes
    max_inflight_requests: int = 256  # queued.max.requests, per connection: reading pauses
    max_connections: int = 1000  # max.connections: further connections are closed at accept
    max_connections_per_ip: int = 1000  # max.connections.per.ip
    connections_max_idle_ms: int = 10 * 60 * 1000  # connections.max.idle.ms (0: never)
    partial_request_timeout_ms: int = 30_000  # seglog: a started request must arrive whole
    sasl_authentication_timeout_ms: int = 10_000  # seglog: SASL listeners authenticate first
    connections_max_reauth_ms: int = 0  # connections.max.reauth.ms: SASL session lifetime (0: none)
    shutdown_timeout_ms: int = 10_000  # longest wait for in-flight requests at shutdown
    # retention and log cleaning (broker defaults; topic configs override them)
    log_retention_ms: int = 7 * 24 * 3600 * 1000  # log.retention.ms (-1: keep forever)
    log_retention_bytes: int = -1  # log.retention.bytes, per partition (-1: no limit)
    log_cleanup_policy: str = "delete"  # log.cleanup.policy: delete, compact, compact,delete
    log_retention_check_interval_ms: int = 5 * 60 * 1000  # log.retention.check.interval.ms
    log_cleaner_delete_retention_ms: int = 24 * 3600 * 1000  # log.cleaner.delete.retention.ms
    log_cleaner_min_compaction_lag_ms: int = 0  # log.cleaner.min.compaction.lag.ms
    log_archive_command: str | None = None  # seglog: gets segments before retention removes them
    # consumer-group membership (classic protocol)
    group_initial_rebalance_delay_ms: int = 100  # group.initial.rebalance.delay.ms (Kafka: 3000)
    group_min_session_timeout_ms: int = 6000  # group.min.session.timeout.ms
    group_max_session_timeout_ms: int = 1_800_000  # group.max.session.timeout.ms
    # listeners and security (None: one PLAINTEXT listener on host:port)
    listeners: tuple[Any, ...] | None = None  # listeners (+ advertised.listeners): _listeners
    ssl_certfile: Path | None = None  # ssl.keystore.location (PEM certificate chain)
    ssl_keyfile: Path | None = None  # ssl.key.password's key, PEM
    ssl_cafile: Path | None = None  # ssl.truststore.location (PEM CAs of client certificates)
    ssl_client_auth: str = "none"  # ssl.client.auth: required, requested, none
    sasl_enabled_mechanisms: tuple[str, ...] = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")
    authorizer_class_name: str | None = None  # authorizer.class.name: any value turns ACLs on
    super_users: tuple[str, ...] = ()  # super.users (User:NAME; the flag separates with ;)
    allow_everyone_if_no_acl_found: bool = False  # allow.everyone.if.no.acl.found
    # operations
    metrics_host: str | None = None  # seglog: serve Prometheus /metrics here (None: off)
    metrics_port: int = 0  # seglog: its port (0: any free port, logged)


def parse_host_port(text: str, default_port: int = 9092) -> tuple[str, int]:
    """``"HOST:PORT"`` / ``"HOST"`` / ``":PORT"`` / ``"[::1]:PORT"`` → (host, port).

    Raises ``ValueError`` on a bad port."""
    host, sep, port_text = text.rpartition(":")
    if not sep:
        return text or "127.0.0.1", default_port
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    port = int(port_text)
    if not 0 <= port <= 65535:
        raise ValueError(f"port out of range: {port}")
    return host or "127.0.0.1", port
