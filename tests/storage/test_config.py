"""LogConfig: Kafka config names, validation."""

from __future__ import annotations

import pytest

from seglog.storage import LogConfig


def test_kafka_names_round_trip():
    cfg = LogConfig(
        segment_bytes=1 << 20,
        segment_ms=60_000,
        flush_messages=10,
        message_timestamp_type="LogAppendTime",
    )
    names = cfg.to_kafka_configs()
    assert names["segment.bytes"] == str(1 << 20)
    assert names["message.timestamp.type"] == "LogAppendTime"
    assert "flush.ms" not in names
    assert LogConfig.from_kafka_configs(names) == cfg
    assert not cfg.fsync_before_ack
    assert LogConfig().fsync_before_ack


def test_unknown_names_ignored_and_never_flush():
    cfg = LogConfig.from_kafka_configs(
        {"retention.ms": "1000", "flush.messages": str(2**63 - 1), "max.message.bytes": "500"}
    )
    assert cfg.flush_messages == 2**63 - 1  # never fsync on a count (relaxed)
    assert not cfg.fsync_before_ack
    assert cfg.max_message_bytes == 500
    assert LogConfig.from_kafka_configs({"flush.ms": str(2**63 - 1)}).flush_ms is None


@pytest.mark.parametrize(
    "kwargs",
    [
        {"segment_bytes": 10},
        {"segment_bytes": 1 << 31},
        {"segment_ms": 0},
        {"index_interval_bytes": 0},
        {"max_message_bytes": 10},
        {"flush_messages": 0},
        {"flush_ms": -1},
        {"message_timestamp_type": "Whenever"},
    ],
)
def test_invalid_values(kwargs):
    with pytest.raises(ValueError):  # noqa: PT011  (each case has its own message)
        LogConfig(**kwargs)
    with pytest.raises(ValueError):  # noqa: PT011
        LogConfig.from_kafka_configs({"segment.bytes": "lots"})
