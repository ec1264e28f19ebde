"""DataDir: topics, ids, names, lock, delete."""

from __future__ import annotations

import uuid

import pytest

from seglog.errors import (
    DataDirLockedError,
    InvalidTopicError,
    ReadOnlyError,
    TopicExistsError,
    UnknownTopicError,
)
from seglog.storage import DataDir, Message, validate_topic_name


@pytest.mark.parametrize(
    "name", ["", ".", "..", "../x", "a/b", "a" * 250, "x y", "tö", "a\x00b", "a\\b"]
)
def test_illegal_topic_names(tmp_path, name):
    with pytest.raises(InvalidTopicError):
        validate_topic_name(name)
    with DataDir(tmp_path / "d") as dd:
        with pytest.raises(InvalidTopicError):
            dd.create_topic(name, 1)
        with pytest.raises(InvalidTopicError):
            dd.delete_topic(name)
        with pytest.raises(InvalidTopicError):
            dd.log(name, 0)
    assert sorted(p.name for p in (tmp_path / "d").iterdir()) == [".lock", "__topics"]


@pytest.mark.parametrize("name", ["a", "a" * 249, "A.b_c-9", "..."])
def test_legal_topic_names(tmp_path, name):
    validate_topic_name(name)
    with DataDir(tmp_path / "d") as dd:
        dd.create_topic(name, 1)
        dd.log(name, 0).publish([Message(value=b"x")])
        dd.delete_topic(name)
        assert dd.topics() == {}


def test_create_persist_delete(tmp_path):
    with DataDir(tmp_path / "d") as dd:
        info = dd.create_topic("events", 3, {"segment.bytes": "4096"})
        assert info.topic_id.int != 0
        assert info.topic_id.version == 4
        with pytest.raises(TopicExistsError):
            dd.create_topic("events", 1)
        log = dd.log("events", 2)
        assert dd.log("events", 2) is log
        assert log.config.segment_bytes == 4096
        assert log.publish([Message(value=b"v")]) == 1
        with pytest.raises(UnknownTopicError):
            dd.log("events", 3)
        with pytest.raises(UnknownTopicError):
            dd.log("nope", 0)
        meta = (tmp_path / "d" / "events-0" / "partition.metadata").read_text()
        assert meta.startswith("version: 0\ntopic_id: ")
    with DataDir(tmp_path / "d") as dd:
        topics = dd.topics()
        assert topics["events"].topic_id == info.topic_id
        assert topics["events"].partitions == 3
        assert dd.log("events", 2).consume(0, 10)[1][0].value == b"v"
        dd.delete_topic("events")
        with pytest.raises(UnknownTopicError):
            dd.delete_topic("events")
        assert dd.topics() == {}
        assert not any(p.name.startswith("events") for p in (tmp_path / "d").iterdir())
        again = dd.create_topic("events", 1)
        assert again.topic_id != info.topic_id
        assert dd.log("events", 0).log_end_offset == 0


def test_writer_lock_and_read_only(tmp_path):
    dd = DataDir(tmp_path / "d")
    dd.create_topic("t", 1)
    dd.log("t", 0).publish([Message(value=b"a")])
    with pytest.raises(DataDirLockedError):
        DataDir(tmp_path / "d")
    with DataDir(tmp_path / "d", read_only=True) as ro:
        assert set(ro.topics()) == {"t"}
        assert ro.log("t", 0).consume(0, 5)[1][0].value == b"a"
        with pytest.raises(ReadOnlyError):
            ro.create_topic("u", 1)
    dd.close()
    with DataDir(tmp_path / "d") as dd2:
        assert isinstance(dd2.topics()["t"].topic_id, uuid.UUID)


def test_read_only_log_of_a_topic_deleted_and_created_again(tmp_path):
    """A read-only DataDir beside the writer: once the writer deleted a topic and created
    one of the same name, ``log`` serves the new topic's partition, not the cached log of
    the deleted one (its files gone, its records shown forever)."""
    with DataDir(tmp_path / "d") as dd, DataDir(tmp_path / "d", read_only=True) as ro:
        dd.create_topic("t", 1)
        dd.log("t", 0).publish([Message(value=b"old0"), Message(value=b"old1")])
        assert [m.value for m in ro.log("t", 0).consume(-2, 10)[1]] == [b"old0", b"old1"]
        dd.delete_topic("t")
        with pytest.raises(UnknownTopicError):
            ro.log("t", 0)
        dd.create_topic("t", 1)
        dd.log("t", 0).publish([Message(value=b"new0")])
        log = ro.log("t", 0)
        log.refresh()
        assert [m.value for m in log.consume(-2, 10)[1]] == [b"new0"]
        assert ro.log("t", 0) is log  # cached again while the topic stays
