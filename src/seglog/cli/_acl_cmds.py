"""``seglog acl list|add|delete`` against any Kafka-protocol broker (kafka-acls' habits):
``--allow-principal User:alice --operation read --topic orders [--resource-pattern-type
prefixed]``. The broker must run an authorizer (seglog: ``--authorizer-class-name``)."""

from __future__ import annotations

from typing import Annotated, Any

import typer
from rich.console import Console
from rich.table import Table

from seglog.cli._client import (
    ClientOptions,
    JsonOut,
    client_command,
    fail,
    kafka_errors_exit_1,
    print_json,
)

__all__ = ["register"]

app = typer.Typer(help="List, add and delete ACLs.", no_args_is_help=True)
_OPERATIONS_HELP = (
    "read, write, create, delete, alter, describe, describe-configs, alter-configs,"
    " cluster-action, idempotent-write or all; repeatable"
)
TIMEOUT = 30.0

_Topic = Annotated[str | None, typer.Option("--topic", help="A topic (or prefix, or *).")]
_Group = Annotated[str | None, typer.Option("--group", help="A consumer group (or prefix, or *).")]
_Cluster = Annotated[bool, typer.Option("--cluster", help="The cluster resource.")]
_Pattern = Annotated[
    str, typer.Option("--resource-pattern-type", help="literal or prefixed (list/delete: any).")
]
_Principal = Annotated[
    str | None, typer.Option("--principal", help="User:NAME (list/delete filter).")
]


def _resource(topic: str | None, group: str | None, cluster: bool) -> tuple[Any, str]:
    from confluent_kafka.admin import ResourceType  # noqa: PLC0415

    chosen = [(ResourceType.TOPIC, topic), (ResourceType.GROUP, group)]
    given = [(t, n) for t, n in chosen if n is not None]
    if cluster:
        given.append((ResourceType.BROKER, "kafka-cluster"))
    if len(given) != 1:
        raise fail("name exactly one of --topic, --group, --cluster", 2)
    return given[0]


def _enum(kind: Any, name: str, flag: str) -> Any:
    try:
        return kind[name.upper().replace("-", "_")]
    except KeyError:
        names = ", ".join(m.name.lower() for m in kind)
        raise fail(f"{flag} {name!r}: one of {names}", 2) from None


def _row(b: Any) -> dict[str, Any]:
    return {
        "resource_type": b.restype.name.lower(),
        "resource_name": b.name,
        "pattern_type": b.resource_pattern_type.name.lower(),
        "principal": b.principal,
        "host": b.host,
        "operation": b.operation.name.lower(),
        "permission": b.permission_type.name.lower(),
    }


@app.command("add")
@client_command
def add(  # noqa: PLR0917 (kafka-acls' options)
    operation: Annotated[
        list[str],
        typer.Option(
            "--operation",
            help=_OPERATIONS_HELP,
        ),
    ],
    allow_principal: Annotated[
        str | None, typer.Option("--allow-principal", help="User:NAME to allow.")
    ] = None,
    deny_principal: Annotated[
        str | None, typer.Option("--deny-principal", help="User:NAME to deny.")
    ] = None,
    host: Annotated[str, typer.Option("--host", help="Client address (* for any).")] = "*",
    topic: _Topic = None,
    group: _Group = None,
    cluster: _Cluster = False,
    pattern: _Pattern = "literal",
    *,
    client: ClientOptions,
) -> None:
    """Add ACLs: one per --operation."""
    from confluent_kafka.admin import (  # noqa: PLC0415
        AclBinding,
        AclOperation,
        AclPermissionType,
        AdminClient,
        ResourcePatternType,
    )

    if (allow_principal is None) == (deny_principal is None):
        raise fail("give one of --allow-principal or --deny-principal", 2)
    kind, name = _resource(topic, group, cluster)
    permission = AclPermissionType.ALLOW if allow_principal else AclPermissionType.DENY
    principal = allow_principal or deny_principal or ""
    bindings = [
        AclBinding(
            kind,
            name,
            _enum(ResourcePatternType, pattern, "--resource-pattern-type"),
            principal,
            host,
            _enum(AclOperation, op, "--operation"),
            permission,
        )
        for op in operation
    ]
    with kafka_errors_exit_1():
        admin = AdminClient(client.config())  # kept alive until its futures resolve
        for future in admin.create_acls(bindings).values():
            future.result(TIMEOUT)
    Console().print(f"added {len(bindings)} ACL(s)")


def _filter(
    topic: str | None, group: str | None, cluster: bool, pattern: str, principal: str | None
) -> Any:
    from confluent_kafka.admin import (  # noqa: PLC0415
        AclBindingFilter,
        AclOperation,
        AclPermissionType,
        ResourcePatternType,
        ResourceType,
    )

    if topic is None and group is None and not cluster:
        kind, name = ResourceType.ANY, None
    else:
        kind, name = _resource(topic, group, cluster)
    return AclBindingFilter(
        kind, name, _enum(ResourcePatternType, pattern, "--resource-pattern-type"),
        principal, None, AclOperation.ANY, AclPermissionType.ANY,
    )  # fmt: skip


@app.command("list")
@client_command
def list_acls(  # noqa: PLR0917
    topic: _Topic = None,
    group: _Group = None,
    cluster: _Cluster = False,
    pattern: _Pattern = "any",
    principal: _Principal = None,
    json_out: JsonOut = False,
    *,
    client: ClientOptions,
) -> None:
    """ACLs matching the filter (all by default)."""
    from confluent_kafka.admin import AdminClient  # noqa: PLC0415

    with kafka_errors_exit_1():
        admin = AdminClient(client.config())  # kept alive until its futures resolve
        found = admin.describe_acls(_filter(topic, group, cluster, pattern, principal)).result(
            TIMEOUT
        )
    rows = [_row(b) for b in found]
    if json_out:
        print_json(rows)
        return
    table = Table(title="ACLs")
    for col in ("resource", "name", "pattern", "principal", "host", "operation", "permission"):
        table.add_column(col)
    for r in rows:
        table.add_row(*(str(v) for v in r.values()))
    Console().print(table)


@app.command("delete")
@client_command
def delete(
    topic: _Topic = None,
    group: _Group = None,
    cluster: _Cluster = False,
    pattern: _Pattern = "literal",
    principal: _Principal = None,
    *,
    client: ClientOptions,
) -> None:
    """Delete the ACLs matching the filter (a resource is required)."""
    from confluent_kafka.admin import AdminClient  # noqa: PLC0415

    flt = _filter(topic, group, cluster, pattern, principal)
    if topic is None and group is None and not cluster:
        raise fail("name the resource: --topic, --group or --cluster", 2)
    with kafka_errors_exit_1():
        admin = AdminClient(client.config())  # kept alive until its futures resolve
        gone = admin.delete_acls([flt])[flt].result(TIMEOUT)
    Console().print(f"deleted {len(gone)} ACL(s)")


def register(root: typer.Typer) -> None:
    """Add the ``acl`` command group to ``root``."""
    root.add_typer(app, name="acl")
