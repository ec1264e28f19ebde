"""``seglog cluster info``: the cluster id, controller, brokers and topic count of any
Kafka-protocol broker (from Metadata)."""

from __future__ import annotations

import typer
from rich.console import Console
from rich.table import Table

from seglog.cli._client import (
    ClientOptions,
    JsonOut,
    client_command,
    kafka_errors_exit_1,
    print_json,
)

__all__ = ["register"]

app = typer.Typer(help="The cluster as its brokers describe it.", no_args_is_help=True)


@app.command("info")
@client_command
def info(json_out: JsonOut = False, *, client: ClientOptions) -> None:
    """Cluster id, controller, brokers and topic counts."""
    from confluent_kafka.admin import AdminClient  # noqa: PLC0415

    with kafka_errors_exit_1():
        admin = AdminClient(client.config())  # kept alive until its answer
        meta = admin.list_topics(timeout=30)
    brokers = [
        {"node_id": b.id, "host": b.host, "port": b.port}
        for b in sorted(meta.brokers.values(), key=lambda b: b.id)
    ]
    doc = {
        "cluster_id": meta.cluster_id,
        "controller_id": meta.controller_id,
        "brokers": brokers,
        "topics": len(meta.topics),
        "partitions": sum(len(t.partitions) for t in meta.topics.values()),
    }
    if json_out:
        print_json(doc)
        return
    console = Console()
    console.print(
        f"cluster [bold]{doc['cluster_id']}[/bold], controller {doc['controller_id']}, "
        f"{doc['topics']} topic(s), {doc['partitions']} partition(s)"
    )
    table = Table(title="brokers")
    for col in ("node id", "host", "port"):
        table.add_column(col)
    for b in brokers:
        table.add_row(str(b["node_id"]), str(b["host"]), str(b["port"]))
    console.print(table)


def register(root: typer.Typer) -> None:
    """Add the ``cluster`` command group to ``root``."""
    root.add_typer(app, name="cluster")
