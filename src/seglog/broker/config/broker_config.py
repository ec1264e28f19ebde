"""Broker configuration: Kafka's broker config names, defaults from ``config.settings``."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

from seglog.broker.config.settings import setting_default as _d
from seglog.broker.config.settings import validate_broker_config

__all__ = ["BrokerConfig"]


@dataclasses.dataclass(frozen=True)
class BrokerConfig:
    """Everything ``seglog serve`` needs. The fields named in
    :data:`~seglog.broker.config.settings.BROKER_SETTINGS` take their defaults and their
    validation from that table (Kafka's name in the comment); construction raises
    ValueError naming the config when one is out of range. The others are set by hand
    from ``seglog serve``'s complex flags.

    Sizes are bytes, times ms. ``port`` 0 binds a free port (the bound port is advertised).
    """

    data_dir: Path  # log.dirs (one directory)
    host: str = "127.0.0.1"
    port: int = 9092
    advertised_host: str | None = None  # advertised.listeners host (default: host)
    advertised_port: int | None = None  # advertised.listeners port (default: bound port)
    node_id: int = _d("node_id")  # node.id
    num_partitions: int = _d("num_partitions")  # num.partitions
    auto_create_topics_enable: bool = _d("auto_create_topics_enable")
    log_segment_bytes: int = _d("log_segment_bytes")
    log_flush_interval_messages: int | None = _d("log_flush_interval_messages")
    log_flush_interval_ms: int | None = _d("log_flush_interval_ms")
    message_max_bytes: int = _d("message_max_bytes")  # largest record batch
    socket_request_max_bytes: int = _d("socket_request_max_bytes")
    max_inflight_requests: int = _d("max_inflight_requests")  # queued.max.requests
    max_connections: int = _d("max_connections")
    max_connections_per_ip: int | None = _d("max_connections_per_ip")  # None: 3/4 of the total
    max_connections_per_ip_overrides: str = _d("max_connections_per_ip_overrides")
    max_connection_creation_rate: int = _d("max_connection_creation_rate")  # KIP-612
    quota_window_num: int = _d("quota_window_num")  # client quotas' samples
    quota_window_size_seconds: int = _d("quota_window_size_seconds")
    connections_max_idle_ms: int = _d("connections_max_idle_ms")
    partial_request_timeout_ms: int = _d("partial_request_timeout_ms")
    sasl_authentication_timeout_ms: int = _d("sasl_authentication_timeout_ms")
    connections_max_reauth_ms: int = _d("connections_max_reauth_ms")
    shutdown_timeout_ms: int = 10_000  # longest wait for in-flight requests at shutdown
    # retention and log cleaning (broker defaults; topic configs override them)
    log_retention_ms: int = _d("log_retention_ms")
    log_retention_bytes: int = _d("log_retention_bytes")
    log_cleanup_policy: str = _d("log_cleanup_policy")
    log_retention_check_interval_ms: int = _d("log_retention_check_interval_ms")
    log_cleaner_delete_retention_ms: int = _d("log_cleaner_delete_retention_ms")
    log_cleaner_min_compaction_lag_ms: int = _d("log_cleaner_min_compaction_lag_ms")
    log_archive_command: str | None = _d("log_archive_command")
    # Iceberg topics' catalog (seglog.iceberg.catalog.*)
    iceberg_catalog_type: str = _d("iceberg_catalog_type")
    iceberg_catalog_uri: str | None = _d("iceberg_catalog_uri")
    iceberg_catalog_warehouse: str | None = _d("iceberg_catalog_warehouse")
    # tiered storage (KIP-405)
    remote_storage_url: str | None = _d("remote_storage_url")
    remote_storage_endpoint_url: str | None = _d("remote_storage_endpoint_url")
    remote_cache_bytes: int = _d("remote_cache_bytes")
    # consumer-group membership (classic protocol)
    group_initial_rebalance_delay_ms: int = _d("group_initial_rebalance_delay_ms")
    group_min_session_timeout_ms: int = _d("group_min_session_timeout_ms")
    group_max_session_timeout_ms: int = _d("group_max_session_timeout_ms")
    # KIP-848 consumer groups (group.protocol=consumer)
    group_consumer_session_timeout_ms: int = _d("group_consumer_session_timeout_ms")
    group_consumer_heartbeat_interval_ms: int = _d("group_consumer_heartbeat_interval_ms")
    group_consumer_unreleased_heartbeat_interval_ms: int = _d(
        "group_consumer_unreleased_heartbeat_interval_ms"
    )
    group_consumer_assignors: str = _d("group_consumer_assignors")
    group_consumer_max_size: int = _d("group_consumer_max_size")
    group_consumer_migration_policy: str = _d("group_consumer_migration_policy")
    # share groups (KIP-932)
    group_share_record_lock_duration_ms: int = _d("group_share_record_lock_duration_ms")
    group_share_delivery_count_limit: int = _d("group_share_delivery_count_limit")
    group_share_partition_max_record_locks: int = _d("group_share_partition_max_record_locks")
    group_share_session_timeout_ms: int = _d("group_share_session_timeout_ms")
    group_share_heartbeat_interval_ms: int = _d("group_share_heartbeat_interval_ms")
    group_share_max_size: int = _d("group_share_max_size")
    group_share_max_share_sessions: int = _d("group_share_max_share_sessions")
    # transactions (KIP-98)
    transaction_max_timeout_ms: int = _d("transaction_max_timeout_ms")
    transactional_id_expiration_ms: int = _d("transactional_id_expiration_ms")
    transaction_abort_timed_out_transaction_cleanup_interval_ms: int = _d(
        "transaction_abort_timed_out_transaction_cleanup_interval_ms"
    )
    # listeners and security (None: one PLAINTEXT listener on host:port)
    listeners: tuple[Any, ...] | None = None  # listeners (+ advertised.listeners): _listeners
    ssl_certfile: Path | None = None  # ssl.keystore.location (PEM certificate chain)
    ssl_keyfile: Path | None = None  # ssl.key.password's key, PEM
    ssl_cafile: Path | None = None  # ssl.truststore.location (PEM CAs of client certificates)
    ssl_client_auth: str = _d("ssl_client_auth")
    sasl_enabled_mechanisms: tuple[str, ...] = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")
    authorizer_class_name: str | None = _d("authorizer_class_name")
    super_users: tuple[str, ...] = ()  # super.users (User:NAME; the flag separates with ;)
    allow_everyone_if_no_acl_found: bool = _d("allow_everyone_if_no_acl_found")
    # operations
    metrics_host: str | None = None  # seglog: serve Prometheus /metrics here (None: off)
    metrics_port: int = 0  # seglog: its port (0: any free port, logged)
    schema_registry_host: str | None = None  # seglog: serve the schema registry (None: off)
    schema_registry_port: int = 0  # seglog: its port (0: any free port, logged)

    def __post_init__(self) -> None:
        validate_broker_config(self)

    @property
    def connections_per_ip(self) -> int:
        """``max.connections.per.ip``; by default three quarters of ``max.connections``
        (at least 1; 750 of 1,000): seglog's default, so that one address flooding the
        broker leaves a quarter of the connections to the others (Kafka's default is no
        per-address limit)."""
        if self.max_connections_per_ip is not None:
            return self.max_connections_per_ip
        return max(1, self.max_connections - self.max_connections // 4)
