"""``seglog quota describe|alter``: client quotas of any Kafka-protocol broker
(kafka-configs' habits: ``--user alice --client-id app --add-config
producer_byte_rate=1048576``; ``--user-default`` is the ``<default>`` user).

Neither confluent-kafka (2.16) nor kafka-python's admin client has the quota APIs, so
these commands send DescribeClientQuotas / AlterClientQuotas (v1, KIP-546) over seglog's
own blocking wire client (``seglog.broker.KafkaConnection``: TLS and SASL from the usual
options) to the first bootstrap broker. Keys: producer_byte_rate and consumer_byte_rate
(bytes/s), request_percentage (%), controller_mutation_rate (mutations/s) for users and
client ids; connection_creation_rate (connections/s) for ips. Exit 1 when the broker
refuses (its error code and message are printed).
"""

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
    print_json,
    wire_call,
)

__all__ = ["register"]

app = typer.Typer(help="Describe and alter client quotas.", no_args_is_help=True)
TIMEOUT = 30.0
_EXACT, _DEFAULT = 0, 1

_User = Annotated[str | None, typer.Option("--user", help="A user (principal name).")]
_UserDefault = Annotated[bool, typer.Option("--user-default", help="The <default> user.")]
_Client = Annotated[str | None, typer.Option("--client-id", help="A client id.")]
_ClientDefault = Annotated[bool, typer.Option("--client-default", help="The <default> client id.")]
_Ip = Annotated[str | None, typer.Option("--ip", help="An IP address (connection rates).")]
_IpDefault = Annotated[bool, typer.Option("--ip-default", help="The <default> ip.")]


def _parts(  # noqa: PLR0917 (one pair of options per entity type)
    user: str | None,
    user_default: bool,
    client_id: str | None,
    client_default: bool,
    ip: str | None,
    ip_default: bool,
) -> list[tuple[str, str | None]]:
    """The entity named by the options: (type, name) pairs, None for <default>."""
    parts: list[tuple[str, str | None]] = []
    for kind, name, default in (
        ("user", user, user_default),
        ("client-id", client_id, client_default),
        ("ip", ip, ip_default),
    ):
        if name is not None and default:
            raise fail(f"give --{kind.split('-')[0]} or its default, not both", 2)
        if name is not None or default:
            parts.append((kind, name))
    return parts


def _call(client: ClientOptions, request: Any) -> Any:
    return wire_call(client, request, "seglog-quota", TIMEOUT)


def _number(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else f"{value:g}"


def _entity_text(entity: list[tuple[str, str | None]]) -> str:
    return ", ".join(f"{t}={'<default>' if n is None else n}" for t, n in entity)


@app.command("describe")
@client_command
def describe(  # noqa: PLR0917 (kafka-configs' options)
    user: _User = None,
    user_default: _UserDefault = False,
    client_id: _Client = None,
    client_default: _ClientDefault = False,
    ip: _Ip = None,
    ip_default: _IpDefault = False,
    strict: Annotated[
        bool, typer.Option("--strict", help="Only entities with exactly the given parts.")
    ] = False,
    json_out: JsonOut = False,
    *,
    client: ClientOptions,
) -> None:
    """Quotas of the entities matching the options (all without any)."""
    from kafka.protocol.admin import DescribeClientQuotasRequest  # noqa: PLC0415

    req = DescribeClientQuotasRequest[1]
    parts = _parts(user, user_default, client_id, client_default, ip, ip_default)
    components = [
        req.ComponentData(entity_type=t, match_type=_DEFAULT if n is None else _EXACT, match=n)
        for t, n in parts
    ]
    resp = _call(client, req(components=components, strict=strict))
    if resp.error_code:
        raise fail(f"error {resp.error_code}: {resp.error_message}")
    rows: list[dict[str, Any]] = [
        {
            "entity": [[e.entity_type, e.entity_name] for e in entry.entity],
            "quotas": {v.key: v.value for v in entry.values},
        }
        for entry in resp.entries or []
    ]
    if json_out:
        print_json(rows)
        return
    table = Table(title="client quotas")
    table.add_column("entity")
    table.add_column("quotas")
    for row in rows:
        quotas = ", ".join(f"{k}={_number(v)}" for k, v in sorted(row["quotas"].items()))
        table.add_row(_entity_text([(t, n) for t, n in row["entity"]]), quotas)
    Console().print(table)


def _add_configs(items: list[str]) -> list[tuple[str, float]]:
    out = []
    for item in (p.strip() for arg in items for p in arg.split(",")):
        key, sep, value = item.partition("=")
        try:
            number = float(value)
        except ValueError:
            number = None
        if not sep or not key.strip() or number is None:
            raise fail(f"--add-config {item!r}: expected key=number", 2)
        out.append((key.strip(), number))
    return out


@app.command("alter")
@client_command
def alter(  # noqa: PLR0917
    user: _User = None,
    user_default: _UserDefault = False,
    client_id: _Client = None,
    client_default: _ClientDefault = False,
    ip: _Ip = None,
    ip_default: _IpDefault = False,
    add_config: Annotated[
        list[str] | None,
        typer.Option("--add-config", help="KEY=VALUE[,KEY=VALUE...] to set; repeatable."),
    ] = None,
    delete_config: Annotated[
        list[str] | None, typer.Option("--delete-config", help="KEY to remove; repeatable.")
    ] = None,
    validate_only: Annotated[
        bool, typer.Option("--validate-only", help="Check only; change nothing.")
    ] = False,
    *,
    client: ClientOptions,
) -> None:
    """Set and remove quotas of one entity."""
    from kafka.protocol.admin import AlterClientQuotasRequest  # noqa: PLC0415

    parts = _parts(user, user_default, client_id, client_default, ip, ip_default)
    if not parts:
        raise fail("name the entity: --user/--user-default, --client-id/--client-default, --ip", 2)
    adds = _add_configs(add_config or [])
    removes = [k.strip() for arg in delete_config or [] for k in arg.split(",") if k.strip()]
    if not adds and not removes:
        raise fail("nothing to do: give --add-config or --delete-config", 2)
    req = AlterClientQuotasRequest[1]
    entry = req.EntryData
    ops = [entry.OpData(key=k, value=v, remove=False) for k, v in adds]
    ops += [entry.OpData(key=k, value=0.0, remove=True) for k in removes]
    body = req(
        entries=[
            entry(
                entity=[entry.EntityData(entity_type=t, entity_name=n) for t, n in parts],
                ops=ops,
            )
        ],
        validate_only=validate_only,
    )
    resp = _call(client, body)
    for result in resp.entries:
        if result.error_code:
            raise fail(f"error {result.error_code}: {result.error_message}")
    done = "valid" if validate_only else "altered"
    Console().print(f"quotas of {_entity_text(parts)} {done}")


def register(root: typer.Typer) -> None:
    """Add the ``quota`` command group to ``root``."""
    root.add_typer(app, name="quota")
