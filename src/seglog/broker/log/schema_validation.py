"""Schema validation on produce (Confluent Server's broker-side schema id validation):
topics whose config turns it on take only records whose value (key) is in Confluent's
wire format (magic byte 0, a 4-byte big-endian schema id) with an id the registry holds
under the topic's subject (TopicNameStrategy: ``<topic>-value``, ``<topic>-key``).

Topic configs (each false by default; either name of a pair turns it on):
``confluent.value.schema.validation`` / ``confluent.key.schema.validation`` (Confluent
Server's names) and ``redpanda.value.schema.id.validation`` /
``redpanda.key.schema.id.validation`` (Redpanda's). A null value or key (a tombstone, a
record without a key) carries no schema and passes.

The Produce handler looks a topic up in :func:`validation_map` (rebuilt when topics or
their configs change), so topics without validation pay one dict lookup; the records of
validated topics are decoded (storage's columnar decoder) and checked one by one.
"""

from __future__ import annotations

from collections.abc import Mapping

from seglog.schemas import Registry, schema_id_of
from seglog.storage import TopicInfo, decode_columns

__all__ = ["KEY_CONFIGS", "VALUE_CONFIGS", "invalid_records", "validation_map"]

VALUE_CONFIGS = ("confluent.value.schema.validation", "redpanda.value.schema.id.validation")
KEY_CONFIGS = ("confluent.key.schema.validation", "redpanda.key.schema.id.validation")


def _on(configs: Mapping[str, str], names: tuple[str, ...]) -> bool:
    return any(configs.get(n, "false").strip().lower() == "true" for n in names)


def validation_map(topics: Mapping[str, TopicInfo]) -> dict[str, tuple[bool, bool]]:
    """Topic → (validate keys, validate values), for the topics validating either."""
    out: dict[str, tuple[bool, bool]] = {}
    for name, info in topics.items():
        keys, values = _on(info.configs, KEY_CONFIGS), _on(info.configs, VALUE_CONFIGS)
        if keys or values:
            out[name] = (keys, values)
    return out


def invalid_records(
    registry: Registry | None,
    topic: str,
    records: bytes | bytearray | memoryview,
    check: tuple[bool, bool],
) -> list[tuple[int, str]]:
    """(index of the record in the batch, why) for each record failing validation; []
    when all pass. Raises CorruptRecordError on a malformed batch."""
    columns = decode_columns(records, borrow=True)
    buffer = columns.buffer
    out: list[tuple[int, str]] = []
    for what, on, positions, lengths in (
        ("key", check[0], columns.key_positions, columns.key_lengths),
        ("value", check[1], columns.value_positions, columns.value_lengths),
    ):
        if not on:
            continue
        subject = f"{topic}-{what}"
        allowed = registry.state.ids_of(subject) if registry is not None else set()
        for index, (pos, length) in enumerate(
            zip(positions.tolist(), lengths.tolist(), strict=True)
        ):
            if length < 0:
                continue  # null: no schema to check
            schema_id = schema_id_of(buffer[pos : pos + min(length, 5)])
            if schema_id is None:
                out.append((index, f"{what} is not in Confluent's wire format (magic 0 + id)"))
            elif schema_id not in allowed:
                out.append(
                    (index, f"{what} schema id {schema_id} is not registered under {subject}")
                )
    return sorted(out)
