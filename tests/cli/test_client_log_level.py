"""The client commands keep librdkafka's informational lines (``%6|...``) off stderr:
``seglog group describe`` printed "Purging 1 unserved events from background queue" on
some runs as its admin client was destroyed."""

from __future__ import annotations

from seglog.cli._client_config import LOG_NOTICE, ClientOptions

from .conftest import Seglog


def test_client_config_logs_notices_and_worse_and_x_overrides_it() -> None:
    assert ClientOptions(brokers="h:1").config()["log_level"] == LOG_NOTICE == 5
    assert ClientOptions(brokers="h:1", extra=("log_level=7",)).config()["log_level"] == "7"


def test_group_describe_prints_no_librdkafka_lines(seglog: Seglog, topic: str) -> None:
    seglog("produce", topic, stdin=b"a\nb\n")
    seglog("consume", topic, "-G", "quiet-group", "-e")
    # the stray line came on about one run in four: ten runs all stay clean
    stderr = [seglog("group", "describe", "quiet-group").stderr.decode() for _ in range(10)]
    assert [s for s in stderr if "|" in s] == []
