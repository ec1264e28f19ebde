"""The declarative tables of topic configs and broker configs.

:data:`BROKER_SETTINGS` is the single source of the static broker configs: the
``BrokerConfig`` fields' defaults and validation, the ``seglog serve`` flags, the keys
of ``seglog serve --config server.properties`` and the BROKER resource of DescribeConfigs
all come from it.

:data:`TOPIC_CONFIGS` has one row per topic config: Kafka's name, its type (Kafka's
``ConfigType`` numbers, as DescribeConfigs v3+ reports them), its broker synonym (a
topic config without an override takes the broker's value: ``retention.ms`` ←
``log.retention.ms``), how to read the broker's value from :class:`BrokerConfig`, and a
validator. DescribeConfigs, AlterConfigs, IncrementalAlterConfigs and CreateTopics all
validate against it: a name not in the table is 40 INVALID_CONFIG, as in Kafka.

Sources (Kafka's ``ConfigSource``): 1 DYNAMIC_TOPIC_CONFIG (a topic override),
4 STATIC_BROKER_CONFIG (a ``seglog serve`` flag or properties key other than the
default), 5 DEFAULT_CONFIG.
"""

from __future__ import annotations

import builtins
import dataclasses
from collections.abc import Callable, Mapping
from typing import Any, NamedTuple

from seglog.storage import check_tiered_cleanup_policy

__all__ = [
    "BROKER_SETTINGS",
    "BROKER_SETTINGS_BY_NAME",
    "CONSUMED",
    "CONSUMED_GROUPS",
    "CONSUMER_GROUP_ASSIGNORS",
    "DEFAULT_CONFIG",
    "DYNAMIC_TOPIC_CONFIG",
    "PROCESS_ROLES",
    "REMOTE_STORAGE_ENABLE",
    "SCHEMA_REGISTRY_CONFIG",
    "STATIC_BROKER_CONFIG",
    "TOPIC_CONFIGS",
    "BrokerEntry",
    "BrokerSetting",
    "TopicConfigDef",
    "broker_entries",
    "consumed_groups",
    "parse_ip_overrides",
    "schema_registry_entries",
    "setting_default",
    "validate_broker_config",
    "validate_remote_storage",
    "validate_topic_configs",
]

DYNAMIC_TOPIC_CONFIG = 1
STATIC_BROKER_CONFIG = 4
DEFAULT_CONFIG = 5

# Kafka's ConfigType (DescribeConfigs v3+)
BOOLEAN, STRING, INT, LONG, LIST = 1, 2, 3, 5, 7

_LONG_MAX = (1 << 63) - 1
_INT_MAX = (1 << 31) - 1


def _int_in(lo: int, hi: int) -> Callable[[str], None]:
    def check(value: str) -> None:
        try:
            number = int(value)
        except ValueError:
            raise ValueError(f"{value!r} is not an integer") from None
        if not lo <= number <= hi:
            raise ValueError(f"{number} is outside [{lo}, {hi}]")

    return check


def _one_of(*allowed: str) -> Callable[[str], None]:
    def check(value: str) -> None:
        if value not in allowed:
            raise ValueError(f"{value!r} is not one of {', '.join(allowed)}")

    return check


def _cleanup_policy(value: str) -> None:
    parts = [p.strip() for p in value.split(",")]
    if not parts or any(p not in ("delete", "compact") for p in parts):
        raise ValueError(f"{value!r}: a list of delete and compact")


def _boolean(value: str) -> None:
    if value.lower() not in ("true", "false"):
        raise ValueError(f"{value!r} is not true or false")


def _group_list(value: str) -> None:
    if value.strip() and any(not g.strip() for g in value.split(",")):
        raise ValueError(f"{value!r}: a comma-separated list of consumer group ids")


CONSUMED = "seglog.retention.consumed"
CONSUMED_GROUPS = "seglog.retention.consumed.groups"


def consumed_groups(value: str | None) -> tuple[str, ...]:
    """The group ids of a ``seglog.retention.consumed.groups`` value (in order, once)."""
    return tuple(dict.fromkeys(g.strip() for g in (value or "").split(",") if g.strip()))


class BrokerSource(NamedTuple):
    """Where a topic config's broker-wide value comes from: a ``BrokerConfig`` field
    (named, so this table needs no import of ``BrokerConfig``) or a constant."""

    field: str | None = None
    const: str | None = None

    def value(self, config: object) -> str | None:
        """The broker's value as Kafka prints it (booleans lower case; None: not set)."""
        if self.field is None:
            return self.const
        value = getattr(config, self.field)
        if value is None:
            return None
        return str(value).lower() if isinstance(value, bool) else str(value)


@dataclasses.dataclass(frozen=True)
class TopicConfigDef:
    """One topic config: Kafka's name and type, its broker synonym, Kafka's default and
    where the broker's value for it comes from (None: not set, e.g. flush.messages under
    seglog's fsync-before-ack default), and a validator raising ValueError."""

    name: str
    type: int
    synonym: str | None
    kafka_default: str | None
    broker: BrokerSource
    validate: Callable[[str], None]
    doc: str

    def broker_value(self, config: object) -> str | None:
        """The running broker's value for this config (``config``: a ``BrokerConfig``)."""
        return self.broker.value(config)


def _field(name: str) -> BrokerSource:
    return BrokerSource(field=name)


def _const(value: str | None) -> BrokerSource:
    return BrokerSource(const=value)


_WEEK_MS = str(7 * 24 * 3600 * 1000)

TOPIC_CONFIGS: dict[str, TopicConfigDef] = {
    d.name: d
    for d in (
        TopicConfigDef(
            "cleanup.policy", LIST, "log.cleanup.policy", "delete",
            _field("log_cleanup_policy"), _cleanup_policy,
            "delete (retention by time/size), compact (last record per key), or both",
        ),
        TopicConfigDef(
            "retention.ms", LONG, "log.retention.ms", _WEEK_MS,
            _field("log_retention_ms"), _int_in(-1, _LONG_MAX),
            "ms a closed segment is kept after its newest record (-1: forever)",
        ),
        TopicConfigDef(
            "retention.bytes", LONG, "log.retention.bytes", "-1",
            _field("log_retention_bytes"), _int_in(-1, _LONG_MAX),
            "bytes per partition above which the oldest segments are removed (-1: no limit)",
        ),
        TopicConfigDef(
            "delete.retention.ms", LONG, "log.cleaner.delete.retention.ms", "86400000",
            _field("log_cleaner_delete_retention_ms"), _int_in(0, _LONG_MAX),
            "ms the cleaner keeps tombstones of a compacted topic",
        ),
        TopicConfigDef(
            "min.compaction.lag.ms", LONG, "log.cleaner.min.compaction.lag.ms", "0",
            _field("log_cleaner_min_compaction_lag_ms"), _int_in(0, _LONG_MAX),
            "ms a record stays uncompacted",
        ),
        TopicConfigDef(
            "segment.bytes", INT, "log.segment.bytes", str(1 << 30),
            _field("log_segment_bytes"), _int_in(64, _INT_MAX),
            "bytes of the active segment before a new one is rolled",
        ),
        TopicConfigDef(
            "seglog.segment.messages", LONG, None, None,
            _const(None), _int_in(1, _LONG_MAX),
            "seglog: records of the active segment before a new one is rolled "
            "(NATS's max msgs per block; unset: no limit)",
        ),
        TopicConfigDef(
            "segment.ms", LONG, "log.roll.ms", _WEEK_MS,
            _const(_WEEK_MS), _int_in(1, _LONG_MAX),
            "ms after the active segment's first append before a new one is rolled",
        ),
        TopicConfigDef(
            "index.interval.bytes", INT, "log.index.interval.bytes", "4096",
            _const("4096"), _int_in(1, _INT_MAX),
            "bytes of log between two offset index entries",
        ),
        TopicConfigDef(
            "max.message.bytes", INT, "message.max.bytes", "1048588",
            _field("message_max_bytes"), _int_in(61, _INT_MAX),
            "largest record batch accepted, in bytes",
        ),
        TopicConfigDef(
            "flush.messages", LONG, "log.flush.interval.messages", None,
            _field("log_flush_interval_messages"), _int_in(1, _LONG_MAX),
            "fsync every N messages instead of before each acknowledgement "
            "(>= 2^62, e.g. Kafka's default Long.MAX_VALUE: never on a count)",
        ),
        TopicConfigDef(
            "flush.ms", LONG, "log.flush.interval.ms", None,
            _field("log_flush_interval_ms"), _int_in(1, _LONG_MAX),
            "fsync data older than N ms instead of before each acknowledgement",
        ),
        TopicConfigDef(
            "message.timestamp.type", STRING, "log.message.timestamp.type", "CreateTime",
            _const("CreateTime"), _one_of("CreateTime", "LogAppendTime"),
            "CreateTime keeps the producer's timestamps, LogAppendTime sets the broker's",
        ),
        TopicConfigDef(
            "seglog.key.index", BOOLEAN, None, "false",
            _const("false"), _boolean,
            "seglog: keep an index of the last offset per key (embedded get_by_key)",
        ),
        TopicConfigDef(
            "seglog.parquet.mirror", BOOLEAN, None, "false",
            _const("false"), _boolean,
            "seglog: write a Parquet mirror of each closed segment (Spark read_topic)",
        ),
        TopicConfigDef(
            "seglog.iceberg.mode", STRING, None, "disabled",
            _const("disabled"), _one_of("disabled", "key_value", "value_schema"),
            "seglog: commit the topic's records to the Iceberg table seglog.<topic> "
            "(key_value: key, value, partition, offset, timestamp, headers columns; "
            "value_schema: the value's registered schema as columns)",
        ),
        TopicConfigDef(
            "seglog.iceberg.lag.ms", LONG, None, "60000",
            _const("60000"), _int_in(1, _LONG_MAX),
            "seglog: the most the Iceberg table may lag the log, in ms (the active "
            "segment's records are committed without waiting for a roll once it passed)",
        ),
        TopicConfigDef(
            "remote.storage.enable", BOOLEAN, None, "false",
            _const("false"), _boolean,
            "tiered storage (KIP-405): copy closed segments to seglog.remote.storage.url "
            "and read them back from there once local retention removed them",
        ),
        TopicConfigDef(
            "local.retention.ms", LONG, "log.local.retention.ms", "-2",
            _const("-2"), _int_in(-2, _LONG_MAX),
            "with remote.storage.enable: ms an uploaded segment stays on local disk after "
            "its newest record (-2: retention.ms, -1: forever)",
        ),
        TopicConfigDef(
            "local.retention.bytes", LONG, "log.local.retention.bytes", "-2",
            _const("-2"), _int_in(-2, _LONG_MAX),
            "with remote.storage.enable: local bytes per partition above which the oldest "
            "uploaded segments leave the local disk (-2: retention.bytes, -1: no limit)",
        ),
        TopicConfigDef(
            CONSUMED, BOOLEAN, None, "false",
            _const("false"), _boolean,
            "seglog: retention also removes the closed segments wholly below the lowest "
            "committed offset of the groups in seglog.retention.consumed.groups; a "
            "partition is not trimmed while one of them has no committed offset for it, "
            "nor when the list is empty",
        ),
        TopicConfigDef(
            "confluent.value.schema.validation", BOOLEAN, None, "false",
            _const("false"), _boolean,
            "refuse records whose value is not in Confluent's wire format with a schema id "
            "registered under <topic>-value (87 INVALID_RECORD; Confluent Server's name)",
        ),
        TopicConfigDef(
            "confluent.key.schema.validation", BOOLEAN, None, "false",
            _const("false"), _boolean,
            "refuse records whose key is not in Confluent's wire format with a schema id "
            "registered under <topic>-key (87 INVALID_RECORD; Confluent Server's name)",
        ),
        TopicConfigDef(
            "redpanda.value.schema.id.validation", BOOLEAN, None, "false",
            _const("false"), _boolean,
            "Redpanda's name of confluent.value.schema.validation (either turns it on)",
        ),
        TopicConfigDef(
            "redpanda.key.schema.id.validation", BOOLEAN, None, "false",
            _const("false"), _boolean,
            "Redpanda's name of confluent.key.schema.validation (either turns it on)",
        ),
        TopicConfigDef(
            CONSUMED_GROUPS, LIST, None, "",
            _const(""), _group_list,
            "seglog: the consumer group ids (comma-separated) every one of which must have "
            "committed past a segment before seglog.retention.consumed=true removes it",
        ),
    )
}  # fmt: skip


@dataclasses.dataclass(frozen=True)
class BrokerSetting:
    """One static broker config: the single source of its ``BrokerConfig`` field and
    default, its ``seglog serve`` flag (:attr:`flag`: the name with dashes), its
    server.properties key (the name), its validation and its DescribeConfigs entry.

    ``type`` is Kafka's ConfigType: BOOLEAN (a ``--x/--no-x`` flag), INT and LONG (an
    int within ``[min, max]``; ``max`` is 2^31-1 for INT, 2^63-1 for LONG unless given),
    STRING and LIST (text, one of ``choices`` when given, checked by ``check`` when
    given). A None ``default`` makes
    the setting optional (an empty value is None)."""

    name: str
    field: str
    type: int
    default: bool | int | str | None
    doc: str
    min: int | None = None
    max: int | None = None
    choices: tuple[str, ...] = ()
    check: Callable[[str], None] | None = None
    panel: str | None = None  # the --help panel of its flag (None: the options')
    sensitive: bool = False  # DescribeConfigs hides its value

    @property
    def flag(self) -> str:
        """The ``seglog serve`` option: ``log.segment.bytes`` → ``--log-segment-bytes``."""
        return "--" + self.name.replace(".", "-")

    @property
    def param(self) -> str:
        """The option's parameter name (``log_segment_bytes``)."""
        return self.name.replace(".", "_")

    @property
    def python_type(self) -> builtins.type[bool | int | str]:
        """bool, int or str."""
        return bool if self.type == BOOLEAN else int if self.type in (INT, LONG) else str

    def parse(self, text: str) -> bool | int | str | None:
        """A flag's or properties file's text → the field's value, validated. Raises
        ValueError naming the config (``log.segment.bytes=10: below the minimum 1024``)."""
        text = text.strip()
        if self.default is None and text == "":
            return None
        value: bool | int | str
        if self.type == BOOLEAN:
            if text.lower() not in ("true", "false"):
                raise ValueError(f"{self.name}={text}: not true or false")
            value = text.lower() == "true"
        elif self.type in (INT, LONG):
            try:
                value = int(text)
            except ValueError:
                raise ValueError(f"{self.name}={text}: not an integer") from None
        else:
            value = text
        self.validate(value)
        return value

    def validate(self, value: object) -> None:
        """Check a field's value (of :attr:`python_type`, or None when optional). Raises
        ValueError naming the config."""
        if value is None and self.default is None:
            return
        kind = self.python_type
        if type(value) is not kind:  # bool is an int: exact types
            what = {bool: "true or false", int: "an integer", str: "a string"}[kind]
            raise ValueError(f"{self.name}={value!r}: not {what}")
        if isinstance(value, int) and not isinstance(value, bool):
            low = self.min
            high = self.max if self.max is not None else _INT_MAX if self.type == INT else _LONG_MAX
            if low is not None and value < low:
                raise ValueError(f"{self.name}={value}: below the minimum {low}")
            if value > high:
                raise ValueError(f"{self.name}={value}: above the maximum {high}")
        if isinstance(value, str):
            if self.choices and value not in self.choices:
                raise ValueError(f"{self.name}={value}: not one of {', '.join(self.choices)}")
            if self.check is not None:
                try:
                    self.check(value)
                except ValueError as exc:
                    raise ValueError(f"{self.name}={value}: {exc}") from None

    def text(self, value: object) -> str | None:
        """The value as Kafka prints it (``true``, ``1048576``; None stays None)."""
        if value is None:
            return None
        return str(value).lower() if isinstance(value, bool) else str(value)


def parse_ip_overrides(value: str) -> dict[str, int]:
    """``max.connections.per.ip.overrides`` (``IP:COUNT[,IP:COUNT...]``, Kafka's format;
    an IPv6 address takes its count after the last colon) → {address: count}. Raises
    ValueError on a missing or negative count."""
    out: dict[str, int] = {}
    for raw in value.split(","):
        item = raw.strip()
        if not item:
            continue
        host, sep, count = item.rpartition(":")
        if not sep or not host.strip():
            raise ValueError(f"{item!r} is not IP:COUNT")
        try:
            number = int(count)
        except ValueError:
            raise ValueError(f"{item!r}: {count!r} is not an integer") from None
        if number < 0:
            raise ValueError(f"{item!r}: a count is 0 or more")
        out[host.strip().strip("[]")] = number
    return out


def _ip_overrides(value: str) -> None:
    parse_ip_overrides(value)


CONSUMER_GROUP_ASSIGNORS = ("uniform", "range")
"""The server-side assignors of KIP-848 consumer groups (Kafka's names)."""


def _assignor_list(value: str) -> None:
    names = [n.strip() for n in value.split(",")]
    if not names or any(n not in CONSUMER_GROUP_ASSIGNORS for n in names):
        raise ValueError(f"a list of {', '.join(CONSUMER_GROUP_ASSIGNORS)}")


def _policy_list(value: str) -> None:
    parts = [p.strip() for p in value.split(",")]
    if not parts or any(p not in ("delete", "compact") for p in parts):
        raise ValueError("a list of delete and compact")


def _remote_url(value: str) -> None:
    if not value.startswith(("file:///", "s3://")):
        raise ValueError("file:///dir or s3://bucket/prefix")


_SEC = "Security (listeners, TLS, SASL)"
_DAY_MS = 24 * 3600 * 1000

# The static broker configs, in --help and DescribeConfigs order. Every one is a
# ``seglog serve`` flag, a server.properties key, a BrokerConfig field (its default here)
# and a DescribeConfigs entry of the BROKER resource. log.dirs, listeners, TLS files,
# SASL mechanisms, super.users, console and metrics addresses are parsed by hand in
# seglog.cli._serve; of them, DescribeConfigs shows log.dirs, listeners,
# advertised.listeners and listener.security.protocol.map.
BROKER_SETTINGS: tuple[BrokerSetting, ...] = (
    BrokerSetting(
        "node.id", "node_id", INT, 0,
        "This broker's id in Metadata, FindCoordinator and DescribeCluster.", min=0,
    ),
    BrokerSetting(
        "num.partitions", "num_partitions", INT, 1,
        "Partitions of auto-created topics.", min=1,
    ),
    BrokerSetting(
        "auto.create.topics.enable", "auto_create_topics_enable", BOOLEAN, True,
        "Create a topic on first use (Metadata), as Kafka does by default.",
    ),
    BrokerSetting(
        "log.segment.bytes", "log_segment_bytes", INT, 1 << 30,
        "Segment size before a roll.", min=1024,
    ),
    BrokerSetting(
        "log.flush.interval.messages", "log_flush_interval_messages", LONG, None,
        "fsync every N messages in the background and answer produces at once "
        "(default: answer acks=1/all only after fsync).", min=1,
    ),
    BrokerSetting(
        "log.flush.interval.ms", "log_flush_interval_ms", LONG, None,
        "fsync at least every T ms in the background (relaxes the default policy).", min=1,
    ),
    BrokerSetting(
        "message.max.bytes", "message_max_bytes", INT, 1048588,
        "Largest record batch (bytes).", min=64,
    ),
    BrokerSetting(
        "socket.request.max.bytes", "socket_request_max_bytes", INT, 100 * 1024 * 1024,
        "Largest request frame (bytes).", min=1024,
    ),
    BrokerSetting(
        "max.connections", "max_connections", INT, 1000,
        "Most client connections at once; more are closed at accept.", min=1,
    ),
    BrokerSetting(
        "max.connections.per.ip", "max_connections_per_ip", INT, None,
        "Most connections from one IP address (default: three quarters of max.connections, "
        "so one flooding address leaves a quarter to the others; Kafka's: no limit).", min=1,
    ),
    BrokerSetting(
        "max.connections.per.ip.overrides", "max_connections_per_ip_overrides", STRING, "",
        "Per-address exceptions to max.connections.per.ip: IP:COUNT[,IP:COUNT...].",
        check=_ip_overrides,
    ),
    BrokerSetting(
        "max.connection.creation.rate", "max_connection_creation_rate", INT, _INT_MAX,
        "Most new connections per second on the broker (KIP-612): faster ones are "
        "accepted but not read from until the rate allows (Kafka's acceptor delay).", min=1,
    ),
    BrokerSetting(
        "quota.window.num", "quota_window_num", INT, 11,
        "Samples a client quota's rate is measured over (Kafka's quota.window.num).", min=1,
    ),
    BrokerSetting(
        "quota.window.size.seconds", "quota_window_size_seconds", INT, 1,
        "Length of one quota sample, in seconds (Kafka's quota.window.size.seconds).", min=1,
    ),
    BrokerSetting(
        "connections.max.idle.ms", "connections_max_idle_ms", LONG, 10 * 60 * 1000,
        "Close connections idle this long, in ms; 0: never.", min=0,
    ),
    BrokerSetting(
        "queued.max.requests", "max_inflight_requests", INT, 256,
        "Requests in flight per connection before reading from it pauses.", min=1,
    ),
    BrokerSetting(
        "partial.request.timeout.ms", "partial_request_timeout_ms", LONG, 30_000,
        "seglog: close a connection whose started request is not whole after this many ms "
        "(0: never).", min=0,
    ),
    BrokerSetting(
        "log.retention.ms", "log_retention_ms", LONG, 7 * _DAY_MS,
        "Remove closed segments whose newest record is older, in ms; -1: never "
        "(topic config retention.ms overrides).", min=-1,
    ),
    BrokerSetting(
        "log.retention.bytes", "log_retention_bytes", LONG, -1,
        "Remove the oldest closed segments while a partition is larger, in bytes; "
        "-1: no limit.", min=-1,
    ),
    BrokerSetting(
        "log.cleanup.policy", "log_cleanup_policy", LIST, "delete",
        "delete, compact or compact,delete (topic config cleanup.policy overrides).",
        check=_policy_list,
    ),
    BrokerSetting(
        "log.retention.check.interval.ms", "log_retention_check_interval_ms", LONG,
        5 * 60 * 1000, "How often retention and compaction run, in ms.", min=1,
    ),
    BrokerSetting(
        "log.cleaner.delete.retention.ms", "log_cleaner_delete_retention_ms", LONG, _DAY_MS,
        "How long tombstones stay in compacted topics, in ms.", min=0,
    ),
    BrokerSetting(
        "log.cleaner.min.compaction.lag.ms", "log_cleaner_min_compaction_lag_ms", LONG, 0,
        "Segments younger than this are not compacted, in ms.", min=0,
    ),
    BrokerSetting(
        "log.archive.command", "log_archive_command", STRING, None,
        "seglog: command run as 'COMMAND TOPIC PARTITION FILE...' with a segment's files "
        "renamed to .bak before retention removes it; it owns them afterwards.",
    ),
    # tiered storage (KIP-405)
    BrokerSetting(
        "seglog.remote.storage.url", "remote_storage_url", STRING, None,
        "seglog: the object store of tiered storage, file:///dir or s3://bucket/prefix "
        "(credentials from the environment: AWS_ACCESS_KEY_ID...); unset: no tiering.",
        check=_remote_url,
    ),
    BrokerSetting(
        "seglog.remote.storage.endpoint.url", "remote_storage_endpoint_url", STRING, None,
        "seglog: an S3-compatible endpoint (http://host:port) instead of AWS's.",
    ),
    BrokerSetting(
        "seglog.remote.cache.bytes", "remote_cache_bytes", LONG, 1 << 30,
        "seglog: bytes of remote segments cached on local disk (LRU).", min=0,
    ),
    BrokerSetting(
        "group.initial.rebalance.delay.ms", "group_initial_rebalance_delay_ms", INT, 100,
        "How long the first rebalance of an empty consumer group waits for more members, "
        "in ms (Kafka's default: 3000).", min=0,
    ),
    BrokerSetting(
        "group.min.session.timeout.ms", "group_min_session_timeout_ms", INT, 6000,
        "Smallest consumer session timeout accepted, in ms.", min=1,
    ),
    BrokerSetting(
        "group.max.session.timeout.ms", "group_max_session_timeout_ms", INT, 1_800_000,
        "Largest consumer session timeout accepted, in ms.", min=1,
    ),
    # share groups (KIP-932; Kafka's GroupCoordinatorConfig / ShareGroupConfig names)
    BrokerSetting(
        "group.share.record.lock.duration.ms", "group_share_record_lock_duration_ms", INT,
        30_000, "How long a share consumer holds the records it acquired before they are "
        "delivered to another, in ms (acquisition lock).", min=1000, max=3_600_000,
    ),
    BrokerSetting(
        "group.share.delivery.count.limit", "group_share_delivery_count_limit", INT, 5,
        "Deliveries of one record to a share group; after the last it is archived.",
        min=2, max=10,
    ),
    BrokerSetting(
        "group.share.partition.max.record.locks", "group_share_partition_max_record_locks",
        INT, 2000, "Most records of one share partition acquired and not yet acknowledged.",
        min=100, max=10_000,
    ),
    BrokerSetting(
        "group.share.session.timeout.ms", "group_share_session_timeout_ms", INT, 45_000,
        "A share-group member without a heartbeat for this long leaves the group (its "
        "acquired records are released), in ms.", min=1,
    ),
    BrokerSetting(
        "group.share.heartbeat.interval.ms", "group_share_heartbeat_interval_ms", INT, 5000,
        "The heartbeat interval share-group members are given, in ms.", min=1,
    ),
    BrokerSetting(
        "group.share.max.size", "group_share_max_size", INT, 200,
        "Most members of one share group (more get 81 GROUP_MAX_SIZE_REACHED).",
        min=1, max=1000,
    ),
    BrokerSetting(
        "group.share.max.share.sessions", "group_share_max_share_sessions", INT, 2000,
        "Most share sessions (ShareFetch) open at once (more get 133 "
        "SHARE_SESSION_LIMIT_REACHED).", min=1,
    ),
    BrokerSetting(
        "group.consumer.session.timeout.ms", "group_consumer_session_timeout_ms", INT, 45_000,
        "KIP-848 consumer groups (group.protocol=consumer): a member that does not heartbeat "
        "for this many ms is removed and its partitions reassigned.", min=1,
    ),
    BrokerSetting(
        "group.consumer.heartbeat.interval.ms", "group_consumer_heartbeat_interval_ms", INT,
        5000, "KIP-848 consumer groups: the heartbeat interval given to members, in ms.", min=1,
    ),
    BrokerSetting(
        "seglog.group.consumer.unreleased.heartbeat.interval.ms",
        "group_consumer_unreleased_heartbeat_interval_ms", INT, 50,
        "seglog, KIP-848 consumer groups: the heartbeat interval given instead (when shorter) "
        "to a member waiting for partitions other members still have to release, for at most "
        "its rebalance timeout, in ms, so that it takes them soon after they are released; "
        "0: always group.consumer.heartbeat.interval.ms.", min=0,
    ),
    BrokerSetting(
        "group.consumer.assignors", "group_consumer_assignors", LIST, "uniform,range",
        "KIP-848 consumer groups: the server-side assignors (uniform, range) members may name "
        "(group.remote.assignor); the first is the default.", check=_assignor_list,
    ),
    BrokerSetting(
        "group.consumer.max.size", "group_consumer_max_size", INT, _INT_MAX,
        "KIP-848 consumer groups: most members of one group; more get 81 "
        "GROUP_MAX_SIZE_REACHED.", min=1,
    ),
    BrokerSetting(
        "group.consumer.migration.policy", "group_consumer_migration_policy", STRING,
        "bidirectional", "Which conversions between classic and KIP-848 consumer groups "
        "are allowed (disabled, upgrade, downgrade, bidirectional; Kafka 4's names and "
        "default). Empty groups always convert; converting a group with live members of the "
        "other protocol is refused loudly (see docs/broker.md).",
        choices=("disabled", "upgrade", "downgrade", "bidirectional"),
    ),
    # transactions (Kafka's TransactionStateManagerConfig names and defaults)
    BrokerSetting(
        "transaction.max.timeout.ms", "transaction_max_timeout_ms", INT, 900_000,
        "Largest transaction.timeout.ms a producer may ask for (more: 50 "
        "INVALID_TRANSACTION_TIMEOUT).", min=1,
    ),
    BrokerSetting(
        "transactional.id.expiration.ms", "transactional_id_expiration_ms", INT, 604_800_000,
        "A transactional id with no transaction and no request for this many ms is "
        "forgotten.", min=1,
    ),
    BrokerSetting(
        "transaction.abort.timed.out.transaction.cleanup.interval.ms",
        "transaction_abort_timed_out_transaction_cleanup_interval_ms", INT, 10_000,
        "How often the coordinator looks for transactions past their timeout (and expired "
        "transactional ids), in ms.", min=1,
    ),
    BrokerSetting(
        "seglog.iceberg.catalog.type", "iceberg_catalog_type", STRING, "sql",
        "seglog: the Iceberg catalog of topics with seglog.iceberg.mode set, a pyiceberg "
        "catalog type (sql: SQLite under <log.dirs>/iceberg by default; rest...).",
    ),
    BrokerSetting(
        "seglog.iceberg.catalog.uri", "iceberg_catalog_uri", STRING, None,
        "seglog: the catalog's URI (default for sql: sqlite:///<log.dirs>/iceberg/catalog.db; "
        "a REST catalog's URL).",
    ),
    BrokerSetting(
        "seglog.iceberg.catalog.warehouse", "iceberg_catalog_warehouse", STRING, None,
        "seglog: the warehouse location (default for sql: <log.dirs>/iceberg/warehouse).",
    ),
    BrokerSetting(
        "ssl.client.auth", "ssl_client_auth", STRING, "none",
        "required, requested or none: client certificates on TLS listeners.",
        choices=("required", "requested", "none"), panel=_SEC,
    ),
    BrokerSetting(
        "sasl.authentication.timeout.ms", "sasl_authentication_timeout_ms", LONG, 10_000,
        "seglog: close a SASL connection not authenticated after this many ms (0: never).",
        min=0, panel=_SEC,
    ),
    BrokerSetting(
        "connections.max.reauth.ms", "connections_max_reauth_ms", LONG, 0,
        "SASL sessions last this many ms: clients re-authenticate (KIP-368) or are "
        "disconnected at their next request; 0: never.", min=0, panel=_SEC,
    ),
    BrokerSetting(
        "authorizer.class.name", "authorizer_class_name", STRING, None,
        "Any value (e.g. StandardAuthorizer) turns ACLs on.", panel=_SEC,
    ),
    BrokerSetting(
        "allow.everyone.if.no.acl.found", "allow_everyone_if_no_acl_found", BOOLEAN, False,
        "Allow access to resources without ACLs.", panel=_SEC,
    ),
)  # fmt: skip

BROKER_SETTINGS_BY_NAME: dict[str, BrokerSetting] = {s.name: s for s in BROKER_SETTINGS}
_BY_FIELD: dict[str, BrokerSetting] = {s.field: s for s in BROKER_SETTINGS}


def setting_default(field: str) -> Any:
    """The table's default of a BrokerConfig field (BrokerConfig's defaults read it)."""
    return _BY_FIELD[field].default


def validate_broker_config(config: object) -> None:
    """Check every table field of a BrokerConfig. Raises ValueError naming the config."""
    for setting in BROKER_SETTINGS:
        setting.validate(getattr(config, setting.field))


class BrokerEntry(NamedTuple):
    """One config of the BROKER resource as DescribeConfigs reports it."""

    name: str
    type: int
    value: str | None
    source: int  # STATIC_BROKER_CONFIG or DEFAULT_CONFIG
    doc: str
    sensitive: bool


PROCESS_ROLES = "broker,controller"
"""Kafka's ``process.roles`` of this node: one combined broker and controller (it answers
DescribeQuorum and DescribeCluster as the only voter and controller)."""


def broker_entries(config: Any) -> list[BrokerEntry]:
    """The BROKER resource's configs (``config``: a ``BrokerConfig``): log.dirs and
    process.roles (static: Kafka has no default for them), then every
    :data:`BROKER_SETTINGS` row with the running broker's value, and broker.id (Kafka's
    synonym of node.id in KRaft: its value and source); the source is
    STATIC_BROKER_CONFIG when the value differs from the table's default (a flag or
    properties key set it), else DEFAULT_CONFIG. None is sensitive but those marked so.
    The listeners' entries need the bound ports: ``config.listeners.listener_entries``."""
    out = [
        BrokerEntry(
            "log.dirs", STRING, str(config.data_dir), STATIC_BROKER_CONFIG,
            "The data directory (seglog serve --data-dir; one directory).", False,
        ),
        BrokerEntry(
            "process.roles", LIST, PROCESS_ROLES, STATIC_BROKER_CONFIG,
            "The roles of this node: seglog is one combined broker and controller.", False,
        ),
    ]  # fmt: skip
    for s in BROKER_SETTINGS:
        value = getattr(config, s.field)
        source = DEFAULT_CONFIG if value == s.default else STATIC_BROKER_CONFIG
        doc = f"{s.doc} (seglog serve {s.flag})"
        text = None if s.sensitive else s.text(value)
        out.append(BrokerEntry(s.name, s.type, text, source, doc, s.sensitive))
        if s.name == "node.id":
            doc = "Kafka's older name of node.id (the same value)."
            out.append(BrokerEntry("broker.id", INT, text, source, doc, False))
    return out


SCHEMA_REGISTRY_CONFIG = "schema.registry.listen"
"""The BROKER resource's entry naming where the schema registry listens: how clients
(the Spark source, ``seglog consume --value-format avro``) find the broker's own registry."""


def schema_registry_entries(url: str | None) -> list[BrokerEntry]:
    """``schema.registry.listen`` = ``http(s)://host:port`` of the running registry
    (seglog serve --schema-registry-listen; the bound port), none when it is not served."""
    if url is None:
        return []
    doc = "Where the schema registry's REST API listens (seglog serve --schema-registry-listen)."
    return [BrokerEntry(SCHEMA_REGISTRY_CONFIG, STRING, url, STATIC_BROKER_CONFIG, doc, False)]


def validate_topic_configs(configs: Mapping[str, str | None]) -> None:
    """Check every name and value against :data:`TOPIC_CONFIGS` (None values are
    deletions: only the name is checked). Raises ValueError naming the config (the broker
    answers 40 INVALID_CONFIG with that message)."""
    for name, value in configs.items():
        spec = TOPIC_CONFIGS.get(name)
        if spec is None:
            raise ValueError(f"Unknown topic config name: {name}")
        if value is not None:
            try:
                spec.validate(value)
            except ValueError as exc:
                raise ValueError(
                    f"Invalid value {value!r} for configuration {name}: {exc}"
                ) from None
    consumed = configs.get(CONSUMED) or "false"
    if consumed.lower() == "true" and not consumed_groups(configs.get(CONSUMED_GROUPS)):
        raise ValueError(
            f"Invalid value {consumed!r} for configuration {CONSUMED}: "
            f"{CONSUMED_GROUPS} names no consumer group, so nothing would ever be "
            "trimmed (a segment goes only once every named group committed past it)"
        )


REMOTE_STORAGE_ENABLE = "remote.storage.enable"


def validate_remote_storage(
    configs: Mapping[str, str | None],
    *,
    store: bool,
    was_enabled: bool = False,
    default_cleanup_policy: str = "delete",
) -> None:
    """Kafka's rules for ``remote.storage.enable`` (KIP-405): true only on a broker with a
    remote store (``seglog.remote.storage.url``), never beside a ``cleanup.policy``
    containing ``compact`` (the topic's, else ``default_cleanup_policy``: the broker's
    ``log.cleanup.policy``; ``seglog.storage.check_tiered_cleanup_policy``), and once true
    never turned off (the remote data would be orphaned). Raises ValueError (40
    INVALID_CONFIG)."""
    enabled = (configs.get(REMOTE_STORAGE_ENABLE) or "false").strip().lower() == "true"
    if enabled and not store:
        raise ValueError(
            "Tiered Storage functionality is disabled in the broker (no "
            "seglog.remote.storage.url): the topic cannot have remote.storage.enable=true"
        )
    check_tiered_cleanup_policy(configs, default_cleanup_policy)
    if was_enabled and not enabled:
        raise ValueError(
            "remote.storage.enable cannot be turned off on a tiered topic: its history "
            "lives in the remote store"
        )
