"""The declarative table of topic configs and broker configs the broker describes.

One row per config: Kafka's name, its type (Kafka's ``ConfigType`` numbers, as
DescribeConfigs v3+ reports them), its broker synonym (a topic config without an override
takes the broker's value: ``retention.ms`` ← ``log.retention.ms``), how to read the
broker's value from :class:`BrokerConfig`, and a validator. DescribeConfigs,
AlterConfigs, IncrementalAlterConfigs and CreateTopics all validate against it: a name
not in the table is 40 INVALID_CONFIG, as in Kafka.

Sources (Kafka's ``ConfigSource``): 1 DYNAMIC_TOPIC_CONFIG (a topic override),
4 STATIC_BROKER_CONFIG (a ``seglog serve`` flag other than Kafka's default),
5 DEFAULT_CONFIG.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping

from seglog.broker._config import BrokerConfig

__all__ = [
    "BROKER_CONFIGS",
    "DEFAULT_CONFIG",
    "DYNAMIC_TOPIC_CONFIG",
    "STATIC_BROKER_CONFIG",
    "TOPIC_CONFIGS",
    "BrokerConfigDef",
    "TopicConfigDef",
    "broker_value",
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


@dataclasses.dataclass(frozen=True)
class TopicConfigDef:
    """One topic config: Kafka's name and type, its broker synonym, Kafka's default and
    the broker's value for it (None: not set, e.g. flush.messages under seglog's
    fsync-before-ack default), and a validator raising ValueError."""

    name: str
    type: int
    synonym: str | None
    kafka_default: str | None
    broker_value: Callable[[BrokerConfig], str | None]
    validate: Callable[[str], None]
    doc: str


def _field(name: str) -> Callable[[BrokerConfig], str | None]:
    def read(config: BrokerConfig) -> str | None:
        value = getattr(config, name)
        if value is None:
            return None
        return str(value).lower() if isinstance(value, bool) else str(value)

    return read


def _const(value: str | None) -> Callable[[BrokerConfig], str | None]:
    return lambda _config: value


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
            "fsync every N messages instead of before each acknowledgement",
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
    )
}  # fmt: skip


@dataclasses.dataclass(frozen=True)
class BrokerConfigDef:
    """One broker config described for the BROKER resource (read-only: seglog's broker
    configs are static, set by ``seglog serve`` flags)."""

    name: str
    type: int
    field: str


BROKER_CONFIGS: tuple[BrokerConfigDef, ...] = (
    BrokerConfigDef("node.id", INT, "node_id"),
    BrokerConfigDef("num.partitions", INT, "num_partitions"),
    BrokerConfigDef("auto.create.topics.enable", BOOLEAN, "auto_create_topics_enable"),
    BrokerConfigDef("log.dirs", STRING, "data_dir"),
    BrokerConfigDef("log.segment.bytes", INT, "log_segment_bytes"),
    BrokerConfigDef("log.flush.interval.messages", LONG, "log_flush_interval_messages"),
    BrokerConfigDef("log.flush.interval.ms", LONG, "log_flush_interval_ms"),
    BrokerConfigDef("message.max.bytes", INT, "message_max_bytes"),
    BrokerConfigDef("socket.request.max.bytes", INT, "socket_request_max_bytes"),
    BrokerConfigDef("queued.max.requests", INT, "max_inflight_requests"),
    BrokerConfigDef("max.connections", INT, "max_connections"),
    BrokerConfigDef("max.connections.per.ip", INT, "max_connections_per_ip"),
    BrokerConfigDef("connections.max.idle.ms", LONG, "connections_max_idle_ms"),
    BrokerConfigDef("connections.max.reauth.ms", LONG, "connections_max_reauth_ms"),
    BrokerConfigDef("log.retention.ms", LONG, "log_retention_ms"),
    BrokerConfigDef("log.retention.bytes", LONG, "log_retention_bytes"),
    BrokerConfigDef("log.cleanup.policy", LIST, "log_cleanup_policy"),
    BrokerConfigDef("log.retention.check.interval.ms", LONG, "log_retention_check_interval_ms"),
    BrokerConfigDef("log.cleaner.delete.retention.ms", LONG, "log_cleaner_delete_retention_ms"),
    BrokerConfigDef("log.cleaner.min.compaction.lag.ms", LONG, "log_cleaner_min_compaction_lag_ms"),
    BrokerConfigDef("group.initial.rebalance.delay.ms", INT, "group_initial_rebalance_delay_ms"),
    BrokerConfigDef("group.min.session.timeout.ms", INT, "group_min_session_timeout_ms"),
    BrokerConfigDef("group.max.session.timeout.ms", INT, "group_max_session_timeout_ms"),
)

_BROKER_DEFAULTS = {f.name: f.default for f in dataclasses.fields(BrokerConfig)}


def broker_value(config: BrokerConfig, field: str) -> tuple[str | None, int]:
    """(value as Kafka prints it, source): STATIC_BROKER_CONFIG when the running broker's
    value differs from seglog's default, else DEFAULT_CONFIG."""
    value = getattr(config, field)
    text = None if value is None else str(value).lower() if isinstance(value, bool) else str(value)
    default = _BROKER_DEFAULTS.get(field, dataclasses.MISSING)
    source = (
        DEFAULT_CONFIG
        if default is not dataclasses.MISSING and default == value
        else STATIC_BROKER_CONFIG
    )
    return text, source


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
