"""``seglog serve --config server.properties``: Kafka's properties format, flags win,
unknown keys ignored with a warning, bad values refused."""

from __future__ import annotations

import dataclasses
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import typer
import typer.core
import typer.main
from confluent_kafka.admin import AdminClient, ConfigResource, ConfigSource
from typer.testing import CliRunner

from seglog.broker import BrokerConfig, BrokerProcess, free_port, start_broker
from seglog.broker.config.settings import BOOLEAN, BROKER_SETTINGS, BrokerSetting
from seglog.cli import build_app
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


# The single source: every row of BROKER_SETTINGS is a serve flag, a properties key and a
# DescribeConfigs entry, validated the same way on each path.

_OTHER = {  # non-default values a broker runs with (without TLS, SASL or topics)
    "ssl.client.auth": "requested",
    "log.cleanup.policy": "compact,delete",
    "authorizer.class.name": "StandardAuthorizer",  # with allow.everyone.if.no.acl.found
    "log.archive.command": "/bin/true",
    "log.flush.interval.messages": "1000",
    "log.flush.interval.ms": "60000",
    "max.connections.per.ip": "500",  # default: 3/4 of max.connections
    "max.connections.per.ip.overrides": "127.0.0.9:5",
    "max.connection.creation.rate": "1000",  # default: unlimited (2^31-1)
    "group.consumer.assignors": "range,uniform",
    "group.consumer.max.size": "100",  # the default is the int maximum
    "group.consumer.migration.policy": "disabled",
    # no Iceberg topic: the catalog is never opened
    "seglog.iceberg.catalog.type": "rest",
    "seglog.iceberg.catalog.uri": "http://127.0.0.1:8181",
    "seglog.iceberg.catalog.warehouse": "file:///tmp/warehouse",
    "seglog.remote.storage.url": "file:///tmp/seglog-test-properties-tier",  # no tiered topic
    "seglog.remote.storage.endpoint.url": "http://127.0.0.1:9",
}


def _other_value(setting: BrokerSetting) -> str:
    """A valid value other than the default, as Kafka prints it (the default itself for a
    setting with a single valid value)."""
    if len(setting.choices) == 1:
        return setting.choices[0]
    if setting.name in _OTHER:
        return _OTHER[setting.name]
    if setting.type == BOOLEAN:
        return str(not setting.default).lower()
    assert isinstance(setting.default, int), f"add {setting.name} to _OTHER"
    return str(setting.default + 1)


def _serve_options() -> dict[str, Any]:
    command = typer.main.get_command(build_app())
    assert isinstance(command, typer.core.TyperGroup)
    serve = command.commands["serve"]
    return {opt: param for param in serve.params for opt in (*param.opts, *param.secondary_opts)}


def test_every_setting_is_a_flag_with_the_table_default() -> None:
    options = _serve_options()
    for setting in BROKER_SETTINGS:
        assert setting.flag in options, setting.name
        param = options[setting.flag]
        assert param.name == setting.param
        assert param.default == setting.default, setting.name
        if setting.type == BOOLEAN:
            assert f"--no-{setting.flag[2:]}" in options
        assert setting.name in (getattr(param, "help", "") or ""), setting.name
    assert {f.name: f.default for f in dataclasses.fields(BrokerConfig)} | {
        s.field: s.default for s in BROKER_SETTINGS
    } == {f.name: f.default for f in dataclasses.fields(BrokerConfig)}


def _describe_broker(bootstrap: str, node: str) -> dict[str, Any]:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    res = ConfigResource(ConfigResource.Type.BROKER, node)
    return dict(admin.describe_configs([res])[res].result(15))


def test_describe_configs_lists_every_setting_with_its_default(broker: str) -> None:
    entries = _describe_broker(broker, "0")
    for setting in BROKER_SETTINGS:
        entry = entries[setting.name]
        assert entry.value == setting.text(setting.default), setting.name
        assert entry.source == ConfigSource.DEFAULT_CONFIG.value, setting.name
        assert entry.is_read_only
        assert {n: s.value for n, s in entry.synonyms.items()} == {setting.name: entry.value}
    assert entries["log.dirs"].source == ConfigSource.STATIC_BROKER_CONFIG.value


KAFKA_DEFAULT_MAP = "SASL_SSL:SASL_SSL,PLAINTEXT:PLAINTEXT,SSL:SSL,SASL_PLAINTEXT:SASL_PLAINTEXT"


def _static(entry: Any) -> tuple[str | None, int, bool, bool]:
    return entry.value, entry.source, entry.is_sensitive, entry.is_read_only


def test_describe_configs_lists_identity_and_listener_configs(
    broker_process: BrokerProcess,
) -> None:
    """Kafka's static broker configs seglog has values for: its listener (bound address),
    the address clients are given (advertised.listeners, Kafka's default: the listener),
    the protocol map, broker.id (node.id's synonym) and process.roles."""
    entries = _describe_broker(broker_process.bootstrap, "0")
    static, default = ConfigSource.STATIC_BROKER_CONFIG.value, ConfigSource.DEFAULT_CONFIG.value
    address = f"PLAINTEXT://127.0.0.1:{broker_process.port}"
    assert _static(entries["listeners"]) == (address, static, False, True)
    assert _static(entries["advertised.listeners"]) == (address, default, False, True)
    assert _static(entries["listener.security.protocol.map"]) == (
        KAFKA_DEFAULT_MAP,
        default,
        False,
        True,
    )
    assert _static(entries["broker.id"]) == ("0", default, False, True)
    assert _static(entries["process.roles"]) == ("broker,controller", static, False, True)


def test_describe_configs_named_and_advertised_listeners(tmp_path: Path) -> None:
    """Named listeners bound to port 0 are described with their bound ports; the given
    advertised addresses and the listener names' protocols are static configs."""
    plain = free_port()
    proc = start_broker(
        tmp_path / "data",
        port=plain,
        extra_args=[
            "--listeners", f"PLAINTEXT://127.0.0.1:{plain},CLIENTS://127.0.0.1:0",
            "--advertised-listeners", f"PLAINTEXT://127.0.0.1:{plain},CLIENTS://clients.example:9999",
            "--listener-security-protocol-map", "CLIENTS:PLAINTEXT",
            "--node-id", "3",
        ],
    )  # fmt: skip
    try:
        entries = _describe_broker(proc.bootstrap, "3")
        listening = entries["listeners"].value
        assert listening is not None
        ports = dict(entry.rsplit(":", 1) for entry in listening.split(","))
        assert ports["PLAINTEXT://127.0.0.1"] == str(plain)
        assert int(ports["CLIENTS://127.0.0.1"]) > 0  # the bound port, not 0
        static = ConfigSource.STATIC_BROKER_CONFIG.value
        assert (entries["advertised.listeners"].value, entries["advertised.listeners"].source) == (
            f"PLAINTEXT://127.0.0.1:{plain},CLIENTS://clients.example:9999",
            static,
        )
        assert _static(entries["listener.security.protocol.map"]) == (
            f"{KAFKA_DEFAULT_MAP},CLIENTS:PLAINTEXT",
            static,
            False,
            True,
        )
        assert _static(entries["broker.id"]) == ("3", static, False, True)
    finally:
        assert proc.stop() == 0, proc.log_text()
        proc.log_path.unlink()


@pytest.mark.parametrize("how", ["flags", "properties"])
def test_every_setting_set_by_flag_or_properties_is_described(
    broker_factory: Callable[..., BrokerProcess], tmp_path: Path, how: str
) -> None:
    values = {s.name: _other_value(s) for s in BROKER_SETTINGS}
    if how == "flags":
        args: list[str] = []
        for setting in BROKER_SETTINGS:
            value = values[setting.name]
            if setting.type == BOOLEAN:
                args.append(setting.flag if value == "true" else f"--no-{setting.flag[2:]}")
            else:
                args += [setting.flag, value]
    else:
        props = tmp_path / "server.properties"
        props.write_text("".join(f"{name}={value}\n" for name, value in values.items()))
        args = ["--config", str(props)]
    proc = broker_factory(args)
    entries = _describe_broker(proc.bootstrap, values["node.id"])
    for setting in BROKER_SETTINGS:
        entry = entries[setting.name]
        assert entry.value == values[setting.name], setting.name
        source = (
            ConfigSource.STATIC_BROKER_CONFIG
            if len(setting.choices) != 1
            else ConfigSource.DEFAULT_CONFIG
        )
        assert entry.source == source.value, setting.name
    assert "is not a seglog serve config" not in proc.log_text()


def _run_serve(args: list[str]) -> tuple[int, str]:
    result = CliRunner().invoke(build_app(), ["serve", *args], env={"COLUMNS": "300"})
    return result.exit_code, " ".join(result.output.replace("│", " ").split())


def test_out_of_range_values_fail_alike_by_flag_and_properties(tmp_path: Path) -> None:
    bounded = [s for s in BROKER_SETTINGS if s.min is not None]
    assert bounded
    for setting in bounded:
        assert setting.min is not None
        bad = setting.min - 1
        reason = f"{setting.name}={bad}: below the minimum {setting.min}"
        code, output = _run_serve(["--data-dir", str(tmp_path / "d"), setting.flag, str(bad)])
        assert code == 2, output
        assert f"Invalid value for '{setting.flag}': {reason}" in output
        props = tmp_path / "bad.properties"
        props.write_text(f"# line 1\n{setting.name}={bad}\n")
        code, output = _run_serve(["--data-dir", str(tmp_path / "d"), "--config", str(props)])
        assert code == 2, output
        assert f"line 2: {reason} ({setting.flag})" in output
    assert not (tmp_path / "d").exists()  # nothing started
    code, output = _run_serve(["--ssl-client-auth", "optional"])
    assert code == 2
    assert "ssl.client.auth=optional: not one of required, requested, none" in output


def test_broker_config_validates_its_fields(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match=r"message\.max\.bytes=1: below the minimum 64"):
        BrokerConfig(data_dir=tmp_path, message_max_bytes=1)
    with pytest.raises(ValueError, match=r"log\.cleanup\.policy=keep"):
        BrokerConfig(data_dir=tmp_path, log_cleanup_policy="keep")
    with pytest.raises(ValueError, match=r"num\.partitions=True: not an integer"):
        BrokerConfig(data_dir=tmp_path, num_partitions=True)
