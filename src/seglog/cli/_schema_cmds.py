"""``seglog schema list|get|register|check|delete|config``: subjects, versions and
compatibility of a Confluent-compatible schema registry (seglog's own, served by
``seglog serve --schema-registry-listen``, by default ``http://127.0.0.1:8081``).

Exit 1 when the registry refuses (its error code and message are printed: 40401 subject
not found, 409 incompatible, 42201 invalid schema, ...), and for ``check`` when the schema
is incompatible."""

from __future__ import annotations

import contextlib
import json
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any, TypeVar

import typer
from rich.console import Console
from rich.table import Table

from seglog.cli._client import options_command
from seglog.cli._client_config import print_json
from seglog.cli._fail import fail
from seglog.cli._schema_client import RegistryCallError, RegistryClient, quote

__all__ = ["register"]

app = typer.Typer(help="Schemas of a schema registry (Confluent's REST API).", no_args_is_help=True)

_Url = Annotated[
    str,
    typer.Option(
        "--registry-url",
        envvar="SCHEMA_REGISTRY_URL",
        help="The registry (schema.registry.url; seglog serve --schema-registry-listen).",
    ),
]
_UserInfo = Annotated[
    str | None,
    typer.Option(
        "--user-info",
        envvar="SCHEMA_REGISTRY_USER_INFO",
        help="USER:PASSWORD for HTTP Basic auth (basic.auth.user.info).",
    ),
]
_Ca = Annotated[str | None, typer.Option("--ca-location", help="PEM CAs of an HTTPS registry.")]
_Json = Annotated[bool, typer.Option("--json", help="Machine-readable JSON instead of text.")]
_Type = Annotated[
    str, typer.Option("--schema-type", help="AVRO, JSON or PROTOBUF.", case_sensitive=False)
]
_Refs = Annotated[
    list[str] | None,
    typer.Option("--reference", help="NAME=SUBJECT:VERSION (repeatable): a schema reference."),
]
_DEFAULT_URL = "http://127.0.0.1:8081"
_F = TypeVar("_F", bound=Callable[..., Any])


_REGISTRY_OPTIONS: dict[str, tuple[Any, Any]] = {
    "url": (_Url, _DEFAULT_URL),
    "user_info": (_UserInfo, None),
    "ca_location": (_Ca, None),
}


def _registry_command(func: _F) -> _F:
    """Give a command the registry options: ``func`` takes a keyword-only ``client:
    RegistryClient``, typer sees ``--registry-url``, ``--user-info`` and ``--ca-location``."""
    return options_command(func, _REGISTRY_OPTIONS, _client)


def _client(url: str, user_info: str | None, ca_location: str | None) -> RegistryClient:
    return RegistryClient(url, user_info, ca_location)


def _run(call: Any) -> Any:
    try:
        return call()
    except RegistryCallError as exc:
        raise fail(str(exc)) from None


def _schema_body(path: Path, schema_type: str, references: list[str] | None) -> dict[str, Any]:
    try:
        text = path.read_text()
    except OSError as exc:
        raise fail(f"{path}: {exc.strerror}", 2) from None
    body: dict[str, Any] = {"schema": text}
    if schema_type.upper() != "AVRO":
        body["schemaType"] = schema_type.upper()
    refs = []
    for ref in references or ():
        name, eq, rest = ref.partition("=")
        subject, colon, version = rest.rpartition(":")
        if not (eq and colon and name and subject and version.isdigit()):
            raise fail(f"--reference {ref!r}: expected NAME=SUBJECT:VERSION", 2)
        refs.append({"name": name, "subject": subject, "version": int(version)})
    if refs:
        body["references"] = refs
    return body


@app.command("list")
@_registry_command
def list_subjects(
    deleted: Annotated[bool, typer.Option("--deleted", help="Soft-deleted subjects too.")] = False,
    prefix: Annotated[str, typer.Option("--prefix", help="Subjects starting so.")] = "",
    as_json: _Json = False,
    *,
    client: RegistryClient,
) -> None:
    """Subjects with their versions and latest schema id."""
    subjects = _run(lambda: client.call("GET", "subjects", deleted=deleted, subjectPrefix=prefix))
    rows = []
    for subject in subjects:
        versions = _run(
            lambda s=subject: client.call("GET", f"subjects/{quote(s)}/versions", deleted=deleted)
        )
        latest = _run(
            lambda s=subject: client.call(
                "GET", f"subjects/{quote(s)}/versions/latest", deleted=deleted
            )
        )
        rows.append({"subject": subject, "versions": versions, "id": latest["id"],
                     "schemaType": latest.get("schemaType", "AVRO")})  # fmt: skip
    if as_json:
        print_json(rows)
        return
    table = Table("subject", "versions", "latest id", "type")
    for row in rows:
        versions_text = ",".join(map(str, row["versions"]))
        table.add_row(row["subject"], versions_text, str(row["id"]), row["schemaType"])
    Console().print(table)


@app.command("get")
@_registry_command
def get(
    subject: Annotated[str | None, typer.Argument(help="The subject (or give --id).")] = None,
    version: Annotated[
        str, typer.Option("--version", help="A version number or latest.")
    ] = "latest",
    schema_id: Annotated[int | None, typer.Option("--id", help="A global schema id.")] = None,
    as_json: _Json = False,
    *,
    client: RegistryClient,
) -> None:
    """Print a schema: a subject's version, or the schema of a global id."""
    if (subject is None) == (schema_id is None):
        raise fail("give a SUBJECT or --id", 2)
    if schema_id is not None:
        found = _run(lambda: client.call("GET", f"schemas/ids/{schema_id}"))
        found["id"] = schema_id
    else:
        found = _run(
            lambda: client.call("GET", f"subjects/{quote(subject or '')}/versions/{version}")
        )
    if as_json:
        print_json(found)
        return
    text = found["schema"]
    with contextlib.suppress(ValueError):  # Protobuf text stays as it is
        text = json.dumps(json.loads(text), indent=2)
    typer.echo(text)


@app.command("register")
@_registry_command
def register_schema(  # noqa: PLR0917 (typer maps each parameter to an option)
    subject: Annotated[str, typer.Argument(help="The subject (TopicNameStrategy: TOPIC-value).")],
    schema_file: Annotated[Path, typer.Argument(help="The schema (.avsc, .json, .proto).")],
    schema_type: _Type = "AVRO",
    references: _Refs = None,
    normalize: Annotated[
        bool, typer.Option("--normalize", help="Register the normalized form.")
    ] = False,
    as_json: _Json = False,
    *,
    client: RegistryClient,
) -> None:
    """Register a schema under a subject (checked against its compatibility level);
    prints its global id."""
    body = _schema_body(schema_file, schema_type, references)
    result = _run(
        lambda: client.call(
            "POST", f"subjects/{quote(subject)}/versions", body, normalize=normalize
        )
    )
    if as_json:
        print_json(result)
    else:
        typer.echo(
            f"id {result['id']}" + (f" version {result['version']}" if "version" in result else "")
        )


@app.command("check")
@_registry_command
def check(  # noqa: PLR0917 (typer maps each parameter to an option)
    subject: Annotated[str, typer.Argument(help="The subject.")],
    schema_file: Annotated[Path, typer.Argument(help="The candidate schema.")],
    schema_type: _Type = "AVRO",
    references: _Refs = None,
    version: Annotated[
        str | None,
        typer.Option("--version", help="Against this version only (default: as the level says)."),
    ] = None,
    as_json: _Json = False,
    *,
    client: RegistryClient,
) -> None:
    """Whether a schema is compatible with a subject (exit 1 when it is not)."""
    body = _schema_body(schema_file, schema_type, references)
    path = f"compatibility/subjects/{quote(subject)}/versions" + (f"/{version}" if version else "")
    result = _run(lambda: client.call("POST", path, body, verbose=True))
    if as_json:
        print_json(result)
    elif result["is_compatible"]:
        typer.echo("compatible")
    else:
        typer.echo("incompatible:")
        for message in result.get("messages", []):
            typer.echo(f"  {message}")
    if not result["is_compatible"]:
        raise typer.Exit(1)


@app.command("delete")
@_registry_command
def delete(
    subject: Annotated[str, typer.Argument(help="The subject.")],
    version: Annotated[str | None, typer.Option("--version", help="Only this version.")] = None,
    permanent: Annotated[
        bool, typer.Option("--permanent", help="Hard delete (after a soft delete).")
    ] = False,
    *,
    client: RegistryClient,
) -> None:
    """Delete a subject or one version (soft; --permanent: hard, after a soft delete)."""
    path = f"subjects/{quote(subject)}" + (f"/versions/{version}" if version else "")
    result = _run(lambda: client.call("DELETE", path, permanent=permanent))
    deleted = result if isinstance(result, list) else [result]
    typer.echo(f"deleted {subject} version(s) {', '.join(map(str, deleted))}")


@app.command("config")
@_registry_command
def config(
    subject: Annotated[
        str | None, typer.Argument(help="A subject (default: the global level).")
    ] = None,
    set_level: Annotated[
        str | None,
        typer.Option("--set", help="NONE, BACKWARD, FORWARD, FULL (+ _TRANSITIVE)."),
    ] = None,
    delete_level: Annotated[
        bool, typer.Option("--delete", help="Remove the subject's level.")
    ] = False,
    *,
    client: RegistryClient,
) -> None:
    """Show (or --set, --delete) the compatibility level of a subject or the global one."""
    path = "config" + (f"/{quote(subject)}" if subject else "")
    if set_level is not None:
        level = _run(lambda: client.call("PUT", path, {"compatibility": set_level.upper()}))[
            "compatibility"
        ]
    elif delete_level:
        level = _run(lambda: client.call("DELETE", path))["compatibilityLevel"]
        typer.echo(f"removed {level}")
        return
    else:
        level = _run(lambda: client.call("GET", path, defaultToGlobal=True if subject else None))
        level = level["compatibilityLevel"]
    typer.echo(level)


def register(app_: typer.Typer) -> None:
    """Add the ``schema`` command group."""
    app_.add_typer(app, name="schema")
