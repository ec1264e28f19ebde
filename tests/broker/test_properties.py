"""``seglog serve --config server.properties``: Kafka's properties format, flags win,
unknown keys ignored with a warning, bad values refused."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

from confluent_kafka.admin import AdminClient, ConfigResource

from seglog.broker._testing import BrokerProcess
from seglog.cli._properties import parse_properties

SEGLOG = str(Path(sys.executable).with_name("seglog"))


def test_java_properties_syntax() -> None:
    text = (
        "# a comment\n! another\n"
        "log.retention.ms=1000\n"
        "num.partitions : 3\n"
        "log.cleanup.policy compact,\\\n    delete\n"
        "key\\=with\\:colon=v\\tw\n"
        "empty=\n"
    )
    assert parse_properties(text) == {
        "log.retention.ms": "1000",
        "num.partitions": "3",
        "log.cleanup.policy": "compact,delete",
        "key=with:colon": "v\tw",
        "empty": "",
    }


def test_serve_reads_server_properties(
    broker_factory: Callable[..., BrokerProcess], tmp_path: Path
) -> None:
    props = tmp_path / "server.properties"
    props.write_text(
        "num.partitions=3\n"
        "log.retention.ms=7200000\n"
        "auto.create.topics.enable=true\n"
        "zookeeper.connect=localhost:2181\n"  # not ours: warned, ignored
        "log.segment.bytes=1048576\n"
    )
    # the flag wins over the file's log.segment.bytes
    proc = broker_factory(["--config", str(props), "--log-segment-bytes", "2097152"])
    admin = AdminClient({"bootstrap.servers": proc.bootstrap})
    meta = admin.list_topics("auto", timeout=10)  # auto-created with num.partitions
    assert len(meta.topics["auto"].partitions) == 3
    res = ConfigResource(ConfigResource.Type.BROKER, "0")
    entries = admin.describe_configs([res])[res].result(10)
    assert entries["log.retention.ms"].value == "7200000"
    assert entries["log.segment.bytes"].value == "2097152"
    assert "zookeeper.connect is not a seglog serve config" in proc.log_text()


def test_bad_values_are_refused(tmp_path: Path) -> None:
    props = tmp_path / "bad.properties"
    props.write_text("num.partitions=many\n")
    done = subprocess.run(
        [SEGLOG, "serve", "--config", str(props), "--data-dir", str(tmp_path / "d")],
        env={**os.environ, "COLUMNS": "200"},  # the error box unwrapped
        capture_output=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 2
    assert b"--num-partitions" in done.stderr  # the option the key maps to
    missing = subprocess.run(
        [SEGLOG, "serve", "--config", str(tmp_path / "nope.properties")],
        capture_output=True,
        timeout=60,
        check=False,
    )
    assert missing.returncode == 2
