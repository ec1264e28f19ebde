"""``seglog topic list|create|describe|alter-config|add-partitions|trim-prefix|delete``
against any Kafka-protocol broker (confluent-kafka's AdminClient).

``trim-prefix`` goes through DeleteRecords, so it works while the broker runs: records
below the given offset become unreadable and the log start offset moves there (whole
segments below it are removed by the broker).
"""

from __future__ import annotations

from typing import Annotated, Any

import typer
from rich.console import Console
from rich.table import Table

from seglog.cli._client import (
    ClientOptions,
    JsonOut,
    admin_client,
    client_command,
    fail,
    kafka_errors_exit_1,
    print_json,
)

__all__ = ["register"]

app = typer.Typer(help="List, create, describe, alter and delete topics.", no_args_is_help=True)
console = Console()
TIMEOUT = 30.0


def _key_values(items: list[str] | None, flag: str) -> dict[str, str]:
    out = {}
    for item in items or ():
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise fail(f"{flag} {item!r}: expected key=value", 2)
        out[key] = value
    return out


@app.command("list")
@client_command
def list_topics(json_out: JsonOut = False, *, client: ClientOptions) -> None:
    """Topics with their partition counts (internal topics included)."""
    with kafka_errors_exit_1():
        admin = admin_client(client)  # kept alive until its futures resolve
        meta = admin.list_topics(timeout=TIMEOUT)
    rows = [
        {
            "topic": name,
            "partitions": len(t.partitions),
            "error": t.error.str() if t.error else None,
        }
        for name, t in sorted(meta.topics.items())
    ]
    if json_out:
        print_json(rows)
        return
    table = Table(title=f"topics ({meta.orig_broker_name})")
    table.add_column("topic")
    table.add_column("partitions", justify="right")
    for row in rows:
        table.add_row(row["topic"], str(row["partitions"]))
    console.print(table)


@app.command("create")
@client_command
def create(
    topic: Annotated[str, typer.Argument(help="Topic name (Kafka's rule: [a-zA-Z0-9._-], ≤ 249).")],
    partitions: Annotated[int, typer.Option("-p", "--partitions", help="Partition count.")] = 1,
    replication_factor: Annotated[
        int, typer.Option("-r", "--replication-factor", help="Replicas (seglog: 1).")
    ] = -1,
    config: Annotated[
        list[str] | None, typer.Option("-c", "--config", help="Topic config key=value, repeatable.")
    ] = None,
    *,
    client: ClientOptions,
) -> None:
    """Create a topic."""
    from confluent_kafka.admin import NewTopic  # noqa: PLC0415

    new = NewTopic(topic, partitions, replication_factor, config=_key_values(config, "-c"))
    with kafka_errors_exit_1():
        admin = admin_client(client)  # kept alive until its futures resolve
        admin.create_topics([new])[topic].result(TIMEOUT)
    console.print(f"created topic {topic} with {partitions} partition(s)")


def _source_name(source: Any) -> str:
    from confluent_kafka.admin import ConfigSource  # noqa: PLC0415

    try:
        return str(ConfigSource(int(source)).name)
    except (ValueError, TypeError):
        return str(getattr(source, "name", source))


def _describe(admin: Any, topic: str) -> dict[str, Any]:
    from confluent_kafka import TopicPartition  # noqa: PLC0415
    from confluent_kafka.admin import ConfigResource, OffsetSpec  # noqa: PLC0415

    meta = admin.list_topics(topic, timeout=TIMEOUT).topics.get(topic)
    if meta is None or meta.error is not None:
        raise fail(f"topic {topic!r}: {meta.error.str() if meta and meta.error else 'unknown'}")
    parts = sorted(meta.partitions)
    offsets: dict[str, dict[int, int]] = {}
    for name, spec in (
        ("log_start_offset", OffsetSpec.earliest()),
        ("log_end_offset", OffsetSpec.latest()),
    ):
        asked = {TopicPartition(topic, p): spec for p in parts}
        futures = admin.list_offsets(asked, request_timeout=TIMEOUT)
        offsets[name] = {tp.partition: f.result(TIMEOUT).offset for tp, f in futures.items()}
    res = ConfigResource(ConfigResource.Type.TOPIC, topic)
    entries = admin.describe_configs([res])[res].result(TIMEOUT)
    configs = {
        name: {
            "value": e.value,
            "source": _source_name(e.source),
        }
        for name, e in sorted(entries.items())
    }
    return {
        "topic": topic,
        "partitions": [
            {
                "partition": p,
                "leader": meta.partitions[p].leader,
                "log_start_offset": offsets["log_start_offset"][p],
                "log_end_offset": offsets["log_end_offset"][p],
            }
            for p in parts
        ],
        "configs": configs,
    }


@app.command("describe")
@client_command
def describe(
    topic: Annotated[str, typer.Argument(help="Topic to describe.")],
    json_out: JsonOut = False,
    *,
    client: ClientOptions,
) -> None:
    """Partitions with log start/end offsets, and configs with their sources."""
    with kafka_errors_exit_1():
        doc = _describe(admin_client(client), topic)
    if json_out:
        print_json(doc)
        return
    table = Table(title=f"topic {topic}")
    for col in ("partition", "leader", "log start offset", "log end offset", "records"):
        table.add_column(col, justify="right")
    for p in doc["partitions"]:
        table.add_row(
            str(p["partition"]),
            str(p["leader"]),
            str(p["log_start_offset"]),
            str(p["log_end_offset"]),
            str(p["log_end_offset"] - p["log_start_offset"]),
        )
    console.print(table)
    configs = Table(title="configs")
    configs.add_column("name")
    configs.add_column("value")
    configs.add_column("source")
    for name, c in doc["configs"].items():
        configs.add_row(name, str(c["value"]), c["source"])
    console.print(configs)


@app.command("alter-config")
@client_command
def alter_config(
    topic: Annotated[str, typer.Argument(help="Topic to change.")],
    set_: Annotated[
        list[str] | None, typer.Option("--set", "-s", help="Set key=value, repeatable.")
    ] = None,
    delete: Annotated[
        list[str] | None, typer.Option("--delete", "-d", help="Back to the default, repeatable.")
    ] = None,
    *,
    client: ClientOptions,
) -> None:
    """Change topic configs (IncrementalAlterConfigs: only the named ones change)."""
    from confluent_kafka.admin import AlterConfigOpType, ConfigEntry, ConfigResource  # noqa: PLC0415

    changes = [
        ConfigEntry(k, v, incremental_operation=AlterConfigOpType.SET)
        for k, v in _key_values(set_, "--set").items()
    ] + [ConfigEntry(k, None, incremental_operation=AlterConfigOpType.DELETE) for k in delete or ()]
    if not changes:
        raise fail("nothing to change: give --set key=value or --delete key", 2)
    res = ConfigResource(ConfigResource.Type.TOPIC, topic, incremental_configs=changes)
    with kafka_errors_exit_1():
        admin = admin_client(client)  # kept alive until its futures resolve
        admin.incremental_alter_configs([res])[res].result(TIMEOUT)
    console.print(f"altered {len(changes)} config(s) of {topic}")


@app.command("add-partitions")
@client_command
def add_partitions(
    topic: Annotated[str, typer.Argument(help="Topic to grow.")],
    total: Annotated[int, typer.Option("--total", "-t", help="New partition count.")],
    *,
    client: ClientOptions,
) -> None:
    """Grow a topic to ``--total`` partitions (CreatePartitions; never shrinks)."""
    from confluent_kafka.admin import NewPartitions  # noqa: PLC0415

    with kafka_errors_exit_1():
        admin = admin_client(client)  # kept alive until its futures resolve
        admin.create_partitions([NewPartitions(topic, total)])[topic].result(TIMEOUT)
    console.print(f"{topic} now has {total} partitions")


@app.command("trim-prefix")
@client_command
def trim_prefix(
    topic: Annotated[str, typer.Argument(help="Topic to trim.")],
    offset: Annotated[
        int, typer.Option("--offset", "-o", help="New log start offset (-1: the end).")
    ],
    partitions: Annotated[
        list[int] | None, typer.Option("-p", "--partition", help="Partition(s) (default: all).")
    ] = None,
    json_out: JsonOut = False,
    *,
    client: ClientOptions,
) -> None:
    """Delete records below ``--offset`` (DeleteRecords; works on a running broker)."""
    from confluent_kafka import TopicPartition  # noqa: PLC0415

    with kafka_errors_exit_1():
        admin = admin_client(client)
        meta = admin.list_topics(topic, timeout=TIMEOUT).topics.get(topic)
        if meta is None or meta.error is not None:
            raise fail(f"topic {topic!r}: unknown")
        chosen = sorted(partitions) if partitions else sorted(meta.partitions)
        futures = admin.delete_records([TopicPartition(topic, p, offset) for p in chosen])
        rows = []
        for tp, future in futures.items():
            result = future.result(TIMEOUT)
            rows.append({"partition": tp.partition, "log_start_offset": result.low_watermark})
    rows.sort(key=lambda r: r["partition"])
    if json_out:
        print_json(rows)
        return
    for row in rows:
        console.print(f"{topic}-{row['partition']}: log start offset {row['log_start_offset']}")


@app.command("delete")
@client_command
def delete(
    topics: Annotated[list[str], typer.Argument(help="Topic(s) to delete.")],
    *,
    client: ClientOptions,
) -> None:
    """Delete topics and their data."""
    with kafka_errors_exit_1():
        admin = admin_client(client)  # kept alive until its futures resolve
        futures = admin.delete_topics(topics, operation_timeout=TIMEOUT)
        for name, future in futures.items():
            future.result(TIMEOUT)
            console.print(f"deleted topic {name}")


def register(root: typer.Typer) -> None:
    """Add the ``topic`` command group to ``root``."""
    root.add_typer(app, name="topic")
