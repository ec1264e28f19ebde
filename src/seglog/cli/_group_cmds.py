"""``seglog group list|describe|delete|seek`` against any Kafka-protocol broker.

``list`` and ``describe`` show each group's type: ``classic`` (JoinGroup/SyncGroup),
``consumer`` (KIP-848, ``group.protocol=consumer``) or ``share`` (KIP-932 share groups),
as the broker reports it (``unknown`` from a broker that does not say).
``describe`` shows the group's state and members with their assignments, and per
partition the committed offset, the log end offset and the lag (log end - committed); for
a share group the share-partition start offset (the lowest offset not yet acknowledged,
released for good or archived) instead of a committed offset, and the lag as log end -
start offset (records not yet settled: in flight or not yet delivered).

confluent-kafka (2.16) neither lists nor describes share groups, so those go over seglog's
own wire client (``seglog.broker.list_share_groups`` / ``describe_share_group``: ListGroups
to every broker of the cluster, ShareGroupDescribe and DescribeShareGroupOffsets at the
group's coordinator), with the same TLS and SASL options. ``describe`` asks
ShareGroupDescribe first and takes the classic/consumer path when the id is not a share
group (or the broker has no share groups).
``seek`` resets committed offsets like ``kafka-consumer-groups --reset-offsets``: it
prints the plan and changes nothing unless ``--execute`` is given; the group must be empty
(no live members), Kafka's rule; a share group, which commits no offsets, is refused
(exit 2).
"""

from __future__ import annotations

import datetime as dt
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

app = typer.Typer(
    help="List, describe, delete groups (classic, consumer, share); seek offsets.",
    no_args_is_help=True,
)
console = Console()
err_console = Console(stderr=True)
TIMEOUT = 30.0


def _state_name(state: Any) -> str:
    return str(getattr(state, "name", state))


def _type_name(group_type: Any) -> str:
    """``classic``, ``consumer`` or ``unknown`` (confluent-kafka's ConsumerGroupType)."""
    return str(getattr(group_type, "name", group_type)).lower()


def _wire_options(client: ClientOptions) -> tuple[dict[str, str], Any] | None:
    """(librdkafka config, ClientSecurity) for seglog's wire client; None (share groups
    are skipped, with a warning) for security options it does not support."""
    from seglog.broker import wire_security  # noqa: PLC0415

    conf = {k: str(v) for k, v in client.config().items()}
    try:
        security = wire_security(conf)
    except Exception as exc:  # unreadable certificate files, SASL without a password...
        raise fail(f"client options: {exc}") from None
    if security is None:
        err_console.print("warning: share groups are not shown (security options unsupported)")
        return None
    return conf, security


def _share_group_rows(admin: Any, client: ClientOptions) -> list[dict[str, str]]:
    """The share groups of every broker of the cluster (ListGroups over the wire)."""
    from seglog.broker import ShareAdminError, list_share_groups  # noqa: PLC0415

    options = _wire_options(client)
    if options is None:
        return []
    _conf, security = options
    brokers = sorted((b.host, b.port) for b in admin.list_topics(timeout=TIMEOUT).brokers.values())
    try:
        found = list_share_groups(brokers, timeout_s=TIMEOUT, security=security)
    except (ShareAdminError, OSError) as exc:
        raise fail(f"listing share groups: {exc}") from None
    return [{"group": g, "type": "share", "state": st.upper()} for g, st in found.items()]


@app.command("list")
@client_command
def list_groups(json_out: JsonOut = False, *, client: ClientOptions) -> None:
    """Groups with their type (classic, consumer, share) and state."""
    with kafka_errors_exit_1():
        admin = admin_client(client)  # kept alive until its futures resolve
        result = admin.list_consumer_groups(request_timeout=TIMEOUT).result(TIMEOUT)
        by_id = {
            g.group_id: {
                "group": g.group_id,
                "type": _type_name(g.type),
                "state": _state_name(g.state),
            }
            for g in result.valid
        }
        by_id.update((r["group"], r) for r in _share_group_rows(admin, client))
    rows = sorted(by_id.values(), key=lambda r: r["group"])
    if json_out:
        print_json(rows)
        return
    table = Table(title="groups")
    table.add_column("group")
    table.add_column("type")
    table.add_column("state")
    for row in rows:
        table.add_row(row["group"], row["type"], row["state"])
    console.print(table)


def _log_end_offsets(
    admin: Any, partitions: list[tuple[str, int]], spec: Any = None
) -> dict[tuple[str, int], int]:
    from confluent_kafka import TopicPartition  # noqa: PLC0415
    from confluent_kafka.admin import OffsetSpec  # noqa: PLC0415

    if not partitions:
        return {}
    asked = {TopicPartition(t, p): spec or OffsetSpec.latest() for t, p in partitions}
    futures = admin.list_offsets(asked, request_timeout=TIMEOUT)
    return {(tp.topic, tp.partition): f.result(TIMEOUT).offset for tp, f in futures.items()}


def _committed(admin: Any, group: str) -> dict[tuple[str, int], int]:
    from confluent_kafka import ConsumerGroupTopicPartitions  # noqa: PLC0415

    futures = admin.list_consumer_group_offsets([ConsumerGroupTopicPartitions(group)])
    result = futures[group].result(TIMEOUT)
    return {(tp.topic, tp.partition): tp.offset for tp in result.topic_partitions if tp.offset >= 0}


def _describe_share(admin: Any, client: ClientOptions, group: str) -> dict[str, Any] | None:
    """The share group ``group`` (None: not a share group, or no share groups there)."""
    from seglog.broker import (  # noqa: PLC0415
        ShareAdminError,
        describe_share_group,
        split_host_port,
    )

    options = _wire_options(client)
    if options is None:
        return None
    conf, security = options
    bootstrap = split_host_port(conf["bootstrap.servers"].split(",")[0].strip())
    try:
        info = describe_share_group(bootstrap, group, timeout_s=TIMEOUT, security=security)
    except (ShareAdminError, OSError) as exc:
        raise fail(f"describing share group {group!r}: {exc}") from None
    if info is None:
        return None
    owners: dict[tuple[str, int], list[str]] = {}
    for m in info.members:
        for key in m.assignment:
            owners.setdefault(key, []).append(m.member_id)
    keys = sorted(set(info.start_offsets) | set(owners))
    ends = _log_end_offsets(admin, keys)
    partitions = []
    for topic, partition in keys:
        end = ends.get((topic, partition), -1)
        start = info.start_offsets.get((topic, partition))
        partitions.append(
            {
                "topic": topic,
                "partition": partition,
                "start_offset": start,
                "log_end_offset": end,
                "lag": None if start is None or end < 0 else max(end - start, 0),
                "member_ids": sorted(owners.get((topic, partition), [])),
            }
        )
    return {
        "group": group,
        "state": info.state.upper(),
        "type": "share",
        "protocol_type": "share",
        "assignor": info.assignor,
        "coordinator": info.coordinator,
        "group_epoch": info.group_epoch,
        "assignment_epoch": info.assignment_epoch,
        "members": [
            {
                "member_id": m.member_id,
                "client_id": m.client_id,
                "host": m.client_host,
                "member_epoch": m.member_epoch,
                "subscribed_topics": m.subscribed_topics,
                "assignment": [{"topic": t, "partition": p} for t, p in m.assignment],
            }
            for m in info.members
        ],
        "partitions": partitions,
    }


def _describe(admin: Any, group: str) -> dict[str, Any]:
    desc = admin.describe_consumer_groups([group], request_timeout=TIMEOUT)[group].result(TIMEOUT)
    members = []
    owner: dict[tuple[str, int], str] = {}
    for m in desc.members:
        assigned = sorted(
            (tp.topic, tp.partition)
            for tp in (m.assignment.topic_partitions if m.assignment else [])
        )
        for key in assigned:
            owner[key] = m.member_id
        members.append(
            {
                "member_id": m.member_id,
                "client_id": m.client_id,
                "host": m.host,
                "group_instance_id": m.group_instance_id,
                "assignment": [{"topic": t, "partition": p} for t, p in assigned],
            }
        )
    committed = _committed(admin, group)
    keys = sorted(set(committed) | set(owner))
    ends = _log_end_offsets(admin, keys)
    partitions = []
    for topic, partition in keys:
        end = ends.get((topic, partition), -1)
        offset = committed.get((topic, partition))
        partitions.append(
            {
                "topic": topic,
                "partition": partition,
                "committed_offset": offset,
                "log_end_offset": end,
                "lag": None if offset is None else max(end - offset, 0),
                "member_id": owner.get((topic, partition)),
            }
        )
    return {
        "group": group,
        "state": _state_name(desc.state),
        "type": _type_name(getattr(desc, "type", "unknown")),
        "protocol_type": getattr(desc, "protocol_type", None),
        "assignor": desc.partition_assignor,
        "coordinator": desc.coordinator.id if desc.coordinator else None,
        "members": members,
        "partitions": partitions,
    }


@app.command("describe")
@client_command
def describe(
    group: Annotated[str, typer.Argument(help="Group id.")],
    json_out: JsonOut = False,
    *,
    client: ClientOptions,
) -> None:
    """State, members, assignments, committed (share groups: start) offsets, log end
    offsets and lag."""
    with kafka_errors_exit_1():
        admin = admin_client(client)  # kept alive until its futures resolve
        doc = _describe_share(admin, client, group) or _describe(admin, group)
    if json_out:
        print_json(doc)
        return
    share = doc["type"] == "share"
    console.print(
        f"group [bold]{group}[/bold] ({doc['type']}): {doc['state']}, "
        f"{len(doc['members'])} member(s)"
    )
    members = Table(title="members")
    for col in ("member id", "client id", "host", "assignment"):
        members.add_column(col)
    for m in doc["members"]:
        parts = ", ".join(f"{a['topic']}-{a['partition']}" for a in m["assignment"])
        members.add_row(m["member_id"], m["client_id"], m["host"], parts)
    console.print(members)
    table = Table(title="offsets")
    for col in ("topic", "partition", "start" if share else "committed", "log end", "lag"):
        table.add_column(col, justify="right" if col != "topic" else "left")
    for p in doc["partitions"]:
        offset = p["start_offset"] if share else p["committed_offset"]
        table.add_row(
            p["topic"],
            str(p["partition"]),
            "-" if offset is None else str(offset),
            str(p["log_end_offset"]),
            "-" if p["lag"] is None else str(p["lag"]),
        )
    console.print(table)


@app.command("delete")
@client_command
def delete(
    groups: Annotated[list[str], typer.Argument(help="Group id(s).")],
    *,
    client: ClientOptions,
) -> None:
    """Delete empty groups: committed offsets, a share group's share-partition state."""
    with kafka_errors_exit_1():
        admin = admin_client(client)  # kept alive until its futures resolve
        futures = admin.delete_consumer_groups(groups, request_timeout=TIMEOUT)
        for name, future in futures.items():
            future.result(TIMEOUT)
            console.print(f"deleted group {name}")


def _seek_targets(
    admin: Any,
    keys: list[tuple[str, int]],
    committed: dict[tuple[str, int], int],
    *,
    to_earliest: bool,
    to_latest: bool,
    to_offset: int | None,
    to_datetime: str | None,
    shift_by: int | None,
) -> dict[tuple[str, int], int]:
    from confluent_kafka.admin import OffsetSpec  # noqa: PLC0415

    earliest = _log_end_offsets(admin, keys, OffsetSpec.earliest())
    latest = _log_end_offsets(admin, keys)

    def clamp(key: tuple[str, int], offset: int) -> int:
        return min(max(offset, earliest[key]), latest[key])

    if to_earliest:
        return {k: earliest[k] for k in keys}
    if to_latest:
        return {k: latest[k] for k in keys}
    if to_offset is not None:
        return {k: clamp(k, to_offset) for k in keys}
    if to_datetime is not None:
        try:
            when = dt.datetime.fromisoformat(to_datetime)
        except ValueError:
            raise fail(f"--to-datetime {to_datetime!r}: expected ISO 8601", 2) from None
        if when.tzinfo is None:
            when = when.replace(tzinfo=dt.UTC)
        found = _log_end_offsets(
            admin, keys, OffsetSpec.for_timestamp(int(when.timestamp() * 1000))
        )
        return {k: latest[k] if found[k] < 0 else found[k] for k in keys}
    assert shift_by is not None
    return {k: clamp(k, committed.get(k, earliest[k]) + shift_by) for k in keys}


@app.command("seek")
@client_command
def seek(  # noqa: PLR0917 (kafka-consumer-groups' options)
    group: Annotated[str, typer.Argument(help="Group id.")],
    topic: Annotated[
        str | None, typer.Option("--topic", help="Only this topic (default: the group's topics).")
    ] = None,
    to_earliest: Annotated[bool, typer.Option("--to-earliest", help="Log start offsets.")] = False,
    to_latest: Annotated[bool, typer.Option("--to-latest", help="Log end offsets.")] = False,
    to_offset: Annotated[
        int | None, typer.Option("--to-offset", help="This offset (clamped).")
    ] = None,
    to_datetime: Annotated[
        str | None, typer.Option("--to-datetime", help="First offset at/after an ISO 8601 time.")
    ] = None,
    shift_by: Annotated[
        int | None, typer.Option("--shift-by", help="Move committed offsets by N (±).")
    ] = None,
    execute: Annotated[bool, typer.Option("--execute", help="Apply (default: dry run).")] = False,
    json_out: JsonOut = False,
    *,
    client: ClientOptions,
) -> None:
    """Reset a group's committed offsets; a dry run unless ``--execute``."""
    from confluent_kafka import ConsumerGroupTopicPartitions, TopicPartition  # noqa: PLC0415

    chosen = [
        to_earliest,
        to_latest,
        to_offset is not None,
        to_datetime is not None,
        shift_by is not None,
    ]
    if sum(chosen) != 1:
        raise fail(
            "give exactly one of --to-earliest, --to-latest, --to-offset, --to-datetime,"
            " --shift-by",
            2,
        )
    with kafka_errors_exit_1():
        admin = admin_client(client)
        if _describe_share(admin, client, group) is not None:
            raise fail(
                f"group {group!r} is a share group: it has no committed offsets to seek"
                " (its start offsets move with AlterShareGroupOffsets)",
                2,
            )
        committed = _committed(admin, group)
        if topic is not None:
            meta = admin.list_topics(topic, timeout=TIMEOUT).topics.get(topic)
            if meta is None or meta.error is not None:
                raise fail(f"topic {topic!r}: unknown")
            keys = [(topic, p) for p in sorted(meta.partitions)]
        else:
            keys = sorted(committed)
        if not keys:
            raise fail(f"group {group!r} has no committed offsets: name a --topic")
        targets = _seek_targets(
            admin, keys, committed, to_earliest=to_earliest, to_latest=to_latest,
            to_offset=to_offset, to_datetime=to_datetime, shift_by=shift_by,
        )  # fmt: skip
        plan = [
            {
                "topic": t,
                "partition": p,
                "current_offset": committed.get((t, p)),
                "new_offset": targets[(t, p)],
            }
            for t, p in keys
        ]
        if execute:
            desc = admin.describe_consumer_groups([group], request_timeout=TIMEOUT)[group].result(
                TIMEOUT
            )
            if desc.members:
                raise fail(
                    f"group {group!r} has {len(desc.members)} live member(s)"
                    f" ({_state_name(desc.state)}): stop its consumers first"
                )
            offsets = [TopicPartition(t, p, targets[(t, p)]) for t, p in keys]
            request = [ConsumerGroupTopicPartitions(group, offsets)]
            admin.alter_consumer_group_offsets(request)[group].result(TIMEOUT)
    if json_out:
        print_json({"group": group, "executed": execute, "partitions": plan})
        return
    table = Table(title=f"seek {group}" + ("" if execute else " (dry run: --execute applies)"))
    for col in ("topic", "partition", "current", "new"):
        table.add_column(col, justify="right" if col != "topic" else "left")
    for row in plan:
        current = row["current_offset"]
        table.add_row(
            row["topic"],
            str(row["partition"]),
            "-" if current is None else str(current),
            str(row["new_offset"]),
        )
    console.print(table)


def register(root: typer.Typer) -> None:
    """Add the ``group`` command group to ``root``."""
    root.add_typer(app, name="group")
