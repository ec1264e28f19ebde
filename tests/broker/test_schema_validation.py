"""Which records validation on produce refuses (``log.schema_validation``), in process:
every config name of both pairs, keys and values, nulls, and ids registered under
another subject."""

from __future__ import annotations

import json
import uuid

from tests.broker._wire import make_batch

from seglog.broker.log.schema_validation import invalid_records, validation_map
from seglog.schemas import Registry, frame_schema_id
from seglog.storage import TopicInfo


def _topic(name: str, **configs: str) -> TopicInfo:
    return TopicInfo(name, uuid.uuid4(), 1, {k.replace("_", "."): v for k, v in configs.items()})


def test_validation_map_reads_confluent_and_redpanda_names() -> None:
    topics = {
        "plain": _topic("plain"),
        "off": _topic("off", confluent_value_schema_validation="false"),
        "values": _topic("values", confluent_value_schema_validation="true"),
        "keys": _topic("keys", confluent_key_schema_validation="TRUE"),
        "rp": _topic(
            "rp",
            redpanda_value_schema_id_validation="true",
            redpanda_key_schema_id_validation="true",
        ),
    }
    assert validation_map(topics) == {
        "values": (False, True),
        "keys": (True, False),
        "rp": (True, True),
    }


def test_keys_values_nulls_and_subjects() -> None:
    registry = Registry(None)  # in memory
    schema = {"schema": json.dumps({"type": "record", "name": "K", "fields": []})}
    key_id = registry.register("t-key", schema)["id"]
    other = registry.register("u-value", {"schema": '"string"'})["id"]
    good_key = frame_schema_id(key_id, b"")
    batch = make_batch([b"anything", None], key=good_key)
    assert invalid_records(registry, "t", batch, (True, False)) == []
    # values checked too: the raw one fails, the null passes
    assert invalid_records(registry, "t", batch, (True, True)) == [
        (0, "value is not in Confluent's wire format (magic 0 + id)")
    ]
    wrong = make_batch([frame_schema_id(other, b"x")], key=b"\x00\x00")
    assert invalid_records(registry, "t", wrong, (True, True)) == [
        (0, "key is not in Confluent's wire format (magic 0 + id)"),
        (0, f"value schema id {other} is not registered under t-value"),
    ]
    assert invalid_records(None, "t", batch, (True, False)) == [
        (0, f"key schema id {key_id} is not registered under t-key"),
        (1, f"key schema id {key_id} is not registered under t-key"),
    ]
