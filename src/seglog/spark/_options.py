"""Options of the ``seglog`` data source, named and interpreted as Spark's Kafka source does.

Spark hands a data source its options as a case-insensitive map of strings
(``DataSource.options``; ``load(path)`` arrives as ``path``). Everything here is plain data
so that it pickles into input partitions and writers that run on executors.

Offsets JSON (Spark's Kafka source format): ``{"topic": {"0": 23, "1": -2}}`` where -2 means
earliest and -1 latest. Offsets the stream reader checkpoints are ``{"topic": {"0": 42}}``
with the next offset to read per partition, built by ``offsets_to_json`` in sorted order
(topics by name, partitions by number) because Spark compares offsets as JSON strings.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from seglog.broker import CLIENT_OPTIONS, client_supports
from seglog.spark._security import client_options

if TYPE_CHECKING:
    from seglog.storage import IsolationLevel

__all__ = [
    "EARLIEST",
    "ISOLATION_LEVELS",
    "LATEST",
    "ReadOptions",
    "TopicPartition",
    "WriteOptions",
    "offsets_from_json",
    "offsets_option",
    "offsets_to_json",
    "parse_bool",
    "parse_duration_ms",
]

EARLIEST = -2
"""Offsets JSON sentinel: the log start offset of the partition."""
LATEST = -1
"""Offsets JSON sentinel: the high watermark (next offset) of the partition."""

TopicPartition = tuple[str, int]

TRANSACTION_TIMEOUT_MS = 900_000
"""Default ``kafka.transaction.timeout.ms`` of the exactly-once sink (ms)."""

ISOLATION_LEVELS = ("read_uncommitted", "read_committed")
"""``kafka.isolation.level`` values (Kafka's consumer config; Spark's Kafka source reads
read_uncommitted unless told)."""


def parse_bool(value: str | None, name: str, default: bool) -> bool:
    """``true``/``false`` (any case) → bool; None → ``default``; anything else: ValueError."""
    if value is None:
        return default
    lowered = value.strip().lower()
    if lowered in ("true", "false"):
        return lowered == "true"
    raise ValueError(f"option {name} must be true or false, not {value!r}")


def _parse_int(value: str | None, name: str, minimum: int) -> int | None:
    if value is None:
        return None
    try:
        number = int(value)
    except ValueError:
        raise ValueError(f"option {name} must be an integer, not {value!r}") from None
    if number < minimum:
        raise ValueError(f"option {name} must be >= {minimum}, not {number}")
    return number


def offsets_from_json(text: str, name: str) -> dict[TopicPartition, int]:
    """Parse ``{"topic": {"partition": offset}}`` into ``{(topic, partition): offset}``.

    Raises ValueError naming the option when the JSON is not of that shape.
    """
    try:
        parsed = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ValueError(f"option {name} is neither earliest, latest nor JSON: {exc}") from None
    if not isinstance(parsed, dict):
        raise ValueError(f'option {name} must be a JSON object like {{"topic": {{"0": 23}}}}')
    result: dict[TopicPartition, int] = {}
    for topic, partitions in parsed.items():
        if not isinstance(partitions, dict):
            raise ValueError(f"option {name}: topic {topic!r} must map partitions to offsets")
        for partition, offset in partitions.items():
            try:
                number = int(partition)
            except ValueError:
                raise ValueError(
                    f"option {name}: partition {partition!r} is not a number"
                ) from None
            if not isinstance(offset, int) or isinstance(offset, bool) or offset < EARLIEST:
                raise ValueError(f"option {name}: offset {offset!r} of {topic}-{number} invalid")
            result[(topic, number)] = offset
    return result


def offsets_to_json(offsets: Mapping[TopicPartition, int]) -> dict[str, dict[str, int]]:
    """``{(topic, partition): offset}`` → ``{"topic": {"partition": offset}}``, sorted.

    Topics sorted by name, partitions by number: the same offsets always serialise to the
    same JSON string, which is how Spark decides whether a micro-batch has new data.
    """
    result: dict[str, dict[str, int]] = {}
    for topic, partition in sorted(offsets):
        result.setdefault(topic, {})[str(partition)] = offsets[(topic, partition)]
    return result


def _kafka_options(options: Mapping[str, str]) -> dict[str, str]:
    """``kafka.*`` options with the prefix removed, in librdkafka's configuration names
    (Java and kafka-python security names translated by ``_security.client_options``)."""
    return client_options(
        {k[len("kafka.") :]: v for k, v in options.items() if k.lower().startswith("kafka.")}
    )


def _get(options: Mapping[str, str], name: str) -> str | None:
    """Case-insensitive lookup (Spark's map is; a plain dict in unit tests may not be)."""
    if name in options:
        return options[name]
    lowered = name.lower()
    for key, value in options.items():
        if key.lower() == lowered:
            return value
    return None


@dataclass(frozen=True)
class ReadOptions:
    """Reader options. Exactly one of ``subscribe``, ``subscribe_pattern``, ``assign``.

    path: the seglog data directory (or None with ``kafka`` bootstrap servers set).
    subscribe: topic names; subscribe_pattern: a regex matched in full against topic names;
    assign: ``{"topic": [0, 1]}`` JSON → explicit partitions.
    starting/ending: "earliest", "latest" or ``{(topic, partition): offset}`` (-2/-1).
    Partitions missing from a JSON map start at earliest and end at latest.
    starting_timestamp / starting_by_timestamp (ms since the epoch; all partitions / per
    partition): start at the first record whose timestamp is >= it (Kafka's ListOffsets by
    timestamp); when no record qualifies, ``starting_timestamp_strategy`` "error" fails the
    query and "latest" starts at the high watermark. As in Spark, ``startingTimestamp`` takes
    precedence over ``startingOffsetsByTimestamp``, which takes precedence over
    ``startingOffsets``. ending_timestamp / ending_by_timestamp (batch only): end before the
    first record at or after it (the high watermark when none qualifies), with the same
    precedence over ``endingOffsets``.
    min_offsets_per_trigger / max_trigger_delay_ms (streaming only): a micro-batch waits
    until that many new offsets are available or the delay (ms) since the last micro-batch
    has passed, whichever is first (ignored by ``trigger(availableNow=True)``).
    isolation_level (``kafka.isolation.level``): read_uncommitted (default, as Spark's
    Kafka source) or read_committed: end offsets are the last stable offset, records of
    aborted transactions are dropped (control records are never returned).
    """

    path: str | None
    subscribe: tuple[str, ...] = ()
    subscribe_pattern: str | None = None
    assign: tuple[TopicPartition, ...] = ()
    starting: str | dict[TopicPartition, int] = "earliest"
    ending: str | dict[TopicPartition, int] = "latest"
    max_offsets_per_trigger: int | None = None
    include_headers: bool = False
    check_crcs: bool = True
    fail_on_data_loss: bool = True
    min_partitions: int | None = None
    kafka: dict[str, str] = field(default_factory=dict, repr=False)  # may hold a password
    starting_timestamp: int | None = None
    starting_by_timestamp: dict[TopicPartition, int] | None = None
    starting_timestamp_strategy: str = "error"
    ending_timestamp: int | None = None
    ending_by_timestamp: dict[TopicPartition, int] | None = None
    min_offsets_per_trigger: int | None = None
    max_trigger_delay_ms: int = 15 * 60 * 1000
    isolation_level: IsolationLevel = "read_uncommitted"

    @property
    def starts_by_time(self) -> bool:
        """True when the start is a timestamp (startingTimestamp / ...ByTimestamp)."""
        return self.starting_timestamp is not None or self.starting_by_timestamp is not None

    @property
    def ends_by_time(self) -> bool:
        """True when the end is a timestamp (endingTimestamp / ...ByTimestamp)."""
        return self.ending_timestamp is not None or self.ending_by_timestamp is not None

    @classmethod
    def parse(cls, options: Mapping[str, str], *, streaming: bool) -> ReadOptions:
        """Validate Spark's option map; raises ValueError with the option's name."""
        path = _get(options, "path")
        kafka = _kafka_options(options)
        isolation = kafka.pop("isolation.level", ISOLATION_LEVELS[0]).strip().lower()
        if isolation not in ISOLATION_LEVELS:
            raise ValueError(
                f"option kafka.isolation.level must be read_uncommitted or read_committed, "
                f"not {isolation!r}"
            )
        if not path and "bootstrap.servers" not in kafka:
            raise ValueError(
                "seglog source needs a data directory: load(path) or option('path', ...), "
                "or option('kafka.bootstrap.servers', 'host:port') to read through a broker"
            )
        chosen = [n for n in ("subscribe", "subscribePattern", "assign") if _get(options, n)]
        if len(chosen) != 1:
            raise ValueError(
                "seglog source needs exactly one of the options subscribe, subscribePattern "
                f"or assign (got {chosen or 'none'})"
            )
        subscribe: tuple[str, ...] = ()
        pattern = None
        assign: tuple[TopicPartition, ...] = ()
        if chosen[0] == "subscribe":
            subscribe = tuple(t.strip() for t in (_get(options, "subscribe") or "").split(","))
            subscribe = tuple(t for t in subscribe if t)
            if not subscribe:
                raise ValueError("option subscribe names no topic")
        elif chosen[0] == "subscribePattern":
            pattern = _get(options, "subscribePattern") or ""
            try:
                re.compile(pattern)
            except re.error as exc:
                raise ValueError(f"option subscribePattern is not a regex: {exc}") from None
        else:
            assign = _parse_assign(_get(options, "assign") or "")
        starting = offsets_option(
            _get(options, "startingOffsets"),
            "startingOffsets",
            "latest" if streaming else "earliest",
        )
        ending = offsets_option(_get(options, "endingOffsets"), "endingOffsets", "latest")
        if ending == "earliest" or (
            isinstance(ending, dict) and any(v == EARLIEST for v in ending.values())
        ):
            raise ValueError("option endingOffsets cannot be earliest (-2), as in Spark's Kafka")
        if streaming and _get(options, "endingOffsets") is not None:
            raise ValueError("option endingOffsets is for batch queries only")
        return cls(
            path=path or None,
            subscribe=subscribe,
            subscribe_pattern=pattern,
            assign=assign,
            starting=starting,
            ending=ending,
            max_offsets_per_trigger=_parse_int(
                _get(options, "maxOffsetsPerTrigger"), "maxOffsetsPerTrigger", 1
            ),
            include_headers=parse_bool(_get(options, "includeHeaders"), "includeHeaders", False),
            check_crcs=parse_bool(_get(options, "checkCrcs"), "checkCrcs", True),
            fail_on_data_loss=parse_bool(_get(options, "failOnDataLoss"), "failOnDataLoss", True),
            min_partitions=_parse_int(_get(options, "minPartitions"), "minPartitions", 1),
            kafka=kafka,
            isolation_level="read_committed"
            if isolation == "read_committed"
            else "read_uncommitted",
            **_timestamp_options(options, streaming=streaming),
            **_trigger_options(options, streaming=streaming),
        )

    def select(self, topics: Mapping[str, int]) -> list[TopicPartition]:
        """The partitions read, given the existing ``{topic: partition count}``; sorted."""
        if self.assign:
            return sorted(tp for tp in self.assign if tp[1] < topics.get(tp[0], 0))
        if self.subscribe_pattern is not None:
            regex = re.compile(self.subscribe_pattern)
            # internal topics never match a pattern (Kafka consumers' exclude.internal.topics)
            names = [t for t in topics if regex.fullmatch(t) and t not in _INTERNAL_TOPICS]
        else:
            names = [t for t in self.subscribe if t in topics]
        return sorted((t, p) for t in names for p in range(topics[t]))


_INTERNAL_TOPICS = frozenset({"__consumer_offsets"})  # seglog.broker's OFFSETS_TOPIC


def _timestamp_options(options: Mapping[str, str], *, streaming: bool) -> dict[str, Any]:
    """The startingTimestamp / endingTimestamp family of options, validated."""
    strategy = (_get(options, "startingOffsetsByTimestampStrategy") or "error").strip().lower()
    if strategy not in ("error", "latest"):
        raise ValueError(
            f"option startingOffsetsByTimestampStrategy must be error or latest, not {strategy!r}"
        )
    ending_timestamp = _parse_int(_get(options, "endingTimestamp"), "endingTimestamp", 0)
    ending_by = _timestamps_json(
        _get(options, "endingOffsetsByTimestamp"), "endingOffsetsByTimestamp"
    )
    if streaming and (ending_timestamp is not None or ending_by is not None):
        raise ValueError("options endingTimestamp/endingOffsetsByTimestamp are for batch queries")
    return {
        "starting_timestamp": _parse_int(
            _get(options, "startingTimestamp"), "startingTimestamp", 0
        ),
        "starting_by_timestamp": _timestamps_json(
            _get(options, "startingOffsetsByTimestamp"), "startingOffsetsByTimestamp"
        ),
        "starting_timestamp_strategy": strategy,
        "ending_timestamp": ending_timestamp,
        "ending_by_timestamp": ending_by,
    }


def _timestamps_json(value: str | None, name: str) -> dict[TopicPartition, int] | None:
    """``{"topic": {"0": 1700000000000}}`` → ``{(topic, 0): ms}``; timestamps must be >= 0."""
    if value is None or not value.strip():
        return None
    stamps = offsets_from_json(value, name)
    negative = [tp for tp, ts in stamps.items() if ts < 0]
    if negative:
        raise ValueError(f"option {name}: timestamps must be >= 0 ms (see {negative[0]})")
    return stamps


def _trigger_options(options: Mapping[str, str], *, streaming: bool) -> dict[str, Any]:
    """minOffsetsPerTrigger and maxTriggerDelay (streaming only)."""
    minimum = _parse_int(_get(options, "minOffsetsPerTrigger"), "minOffsetsPerTrigger", 1)
    delay_text = _get(options, "maxTriggerDelay")
    if not streaming and (minimum is not None or delay_text is not None):
        raise ValueError("options minOffsetsPerTrigger/maxTriggerDelay are for streaming queries")
    result: dict[str, Any] = {"min_offsets_per_trigger": minimum}
    if delay_text is not None:
        result["max_trigger_delay_ms"] = parse_duration_ms(delay_text, "maxTriggerDelay")
    return result


_DURATION_UNITS = {"ms": 1, "s": 1000, "m": 60_000, "min": 60_000, "h": 3_600_000, "d": 86_400_000}


def parse_duration_ms(text: str, name: str) -> int:
    """Spark's time strings: ``"15m"``, ``"30s"``, ``"250ms"``, ``"1h"``, ``"2d"``; a bare
    number is milliseconds. Raises ValueError naming the option."""
    match = re.fullmatch(r"\s*(\d+)\s*([a-z]*)\s*", text.lower())
    if match is None or match.group(2) not in ("", *_DURATION_UNITS):
        raise ValueError(f"option {name} must be a duration like 15m, 30s or 500ms, not {text!r}")
    return int(match.group(1)) * _DURATION_UNITS.get(match.group(2), 1)


def offsets_option(value: str | None, name: str, default: str) -> str | dict[TopicPartition, int]:
    """``earliest`` / ``latest`` (any case) or an offsets JSON map; ``default`` when unset."""
    if value is None or not value.strip():
        return default
    lowered = value.strip().lower()
    if lowered in ("earliest", "latest"):
        return lowered
    return offsets_from_json(value, name)


def _parse_assign(text: str) -> tuple[TopicPartition, ...]:
    try:
        parsed = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ValueError(f'option assign must be JSON like {{"topic": [0, 1]}}: {exc}') from None
    if not isinstance(parsed, dict) or not all(
        isinstance(ps, list) and all(isinstance(p, int) and p >= 0 for p in ps)
        for ps in parsed.values()
    ):
        raise ValueError('option assign must be JSON like {"topic": [0, 1]}')
    return tuple(sorted((t, p) for t, ps in parsed.items() for p in ps))


@dataclass(frozen=True)
class WriteOptions:
    """Writer options: the target topic (or a ``topic`` column) and where to write.

    path: data directory (staged, exactly-once for streaming); or kafka bootstrap servers
    (produced through a broker with confluent-kafka, at-least-once).
    partitions: partition count used when the topic is created in path mode (default 1).
    compression: codec of staged record batches in path mode: none, gzip, snappy, lz4, zstd.
    sink_id: names the streaming sink's committed-batch record (default: the topic).
    exactly_once (``exactlyOnce``, wire mode): write in Kafka transactions that the driver
    commits (``_exactly_once``); path mode is exactly-once already and ignores it.
    transactional_id_prefix (``transactionalIdPrefix``): replaces ``seglog-sink`` at the
    start of the transactional ids (ACLs by prefix); must differ between concurrent writes.
    transaction_timeout_ms (``kafka.transaction.timeout.ms``, Kafka's producer config):
    how long the cluster keeps a task's transaction open before aborting it; default
    900000 (15 min, Kafka's default ``transaction.max.timeout.ms``): a write's first tasks
    wait for its last one and the driver's commit.
    """

    path: str | None
    topic: str | None
    partitions: int = 1
    compression: str = "none"
    sink_id: str | None = None
    kafka: dict[str, str] = field(default_factory=dict, repr=False)  # may hold a password
    exactly_once: bool = False
    transactional_id_prefix: str | None = None
    transaction_timeout_ms: int = TRANSACTION_TIMEOUT_MS

    @classmethod
    def parse(cls, options: Mapping[str, str]) -> WriteOptions:
        """Validate Spark's option map; raises ValueError with the option's name."""
        path = _get(options, "path")
        kafka = _kafka_options(options)
        if not path and "bootstrap.servers" not in kafka:
            raise ValueError(
                "seglog sink needs option path (data directory) or kafka.bootstrap.servers"
            )
        compression = (_get(options, "compression") or "none").lower()
        if compression not in ("none", "gzip", "snappy", "lz4", "zstd"):
            raise ValueError(f"option compression {compression!r} is not a Kafka codec")
        timeout = _parse_int(
            kafka.pop("transaction.timeout.ms", None), "kafka.transaction.timeout.ms", 1
        )
        exactly_once = parse_bool(_get(options, "exactlyOnce"), "exactlyOnce", False)
        if exactly_once and not path and not client_supports(kafka):
            raise ValueError(
                "option exactlyOnce needs kafka.* options the wire client honours "
                f"({', '.join(sorted(CLIENT_OPTIONS))}; PLAINTEXT, SSL, SASL PLAIN/SCRAM)"
            )
        return cls(
            path=path or None,
            topic=_get(options, "topic") or None,
            partitions=_parse_int(_get(options, "partitions"), "partitions", 1) or 1,
            compression=compression,
            sink_id=_get(options, "sinkId") or None,
            kafka=kafka,
            exactly_once=exactly_once and not path,
            transactional_id_prefix=_get(options, "transactionalIdPrefix") or None,
            transaction_timeout_ms=TRANSACTION_TIMEOUT_MS if timeout is None else timeout,
        )
