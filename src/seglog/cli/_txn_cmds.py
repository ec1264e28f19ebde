"""``seglog transactions list | describe | abort``: what Kafka's ``kafka-transactions.sh``
does, against any Kafka-protocol broker.

- ``list``: ListTransactions (``--state Ongoing``, ``--producer-id``, ``--duration-filter``
  in ms: only transactions running longer);
- ``describe --transactional-id ID``: DescribeTransactions (state, producer id and epoch,
  timeout, start time, partitions);
- ``abort --topic T --partition P`` with ``--start-offset N`` (the hanging transaction's
  first offset: its producer is found with DescribeProducers) or ``--producer-id``,
  ``--producer-epoch`` and ``--coordinator-epoch``: a WriteTxnMarkers ABORT to that
  partition (CLUSTER_ACTION needed), as Kafka's tool aborts a hanging transaction its
  coordinator forgot.

The requests go over seglog's blocking wire client (``seglog.broker.KafkaConnection``:
TLS and SASL from the usual options) to the first bootstrap broker. Exit 1 when the broker
refuses (its error code is printed).
"""

from __future__ import annotations

import datetime
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

app = typer.Typer(
    help="List, describe and abort transactions (kafka-transactions.sh).", no_args_is_help=True
)
TIMEOUT = 30.0


def _call(client: ClientOptions, request: Any) -> Any:
    return wire_call(client, request, "seglog-txn", TIMEOUT)


def _when(ms: int) -> str:
    if ms < 0:
        return "-"
    return datetime.datetime.fromtimestamp(ms / 1000, datetime.UTC).isoformat(timespec="seconds")


@app.command("list")
@client_command
def list_transactions(
    state: Annotated[
        list[str] | None,
        typer.Option("--state", help="Only these states (Ongoing, PrepareCommit, ...)."),
    ] = None,
    producer_id: Annotated[
        list[int] | None, typer.Option("--producer-id", help="Only these producer ids.")
    ] = None,
    duration_filter: Annotated[
        int, typer.Option("--duration-filter", help="Only transactions running longer (ms).")
    ] = -1,
    json_out: JsonOut = False,
    *,
    client: ClientOptions,
) -> None:
    """Transactional ids and their states."""
    from kafka.protocol.admin import ListTransactionsRequest  # noqa: PLC0415

    req = ListTransactionsRequest[1](
        state_filters=state or [], producer_id_filters=producer_id or [],
        duration_filter=duration_filter,
    )  # fmt: skip
    resp = _call(client, req)
    if resp.error_code:
        raise fail(f"error {resp.error_code}")
    rows = [
        {"transactional_id": t.transactional_id, "producer_id": t.producer_id,
         "state": t.transaction_state}
        for t in resp.transaction_states
    ]  # fmt: skip
    if json_out:
        print_json(rows)
        return
    table = Table(title="transactions")
    for column in ("transactional id", "producer id", "state"):
        table.add_column(column)
    for row in rows:
        table.add_row(row["transactional_id"], str(row["producer_id"]), row["state"])
    Console().print(table)


@app.command("describe")
@client_command
def describe(
    transactional_id: Annotated[str, typer.Option("--transactional-id", help="The id.")],
    json_out: JsonOut = False,
    *,
    client: ClientOptions,
) -> None:
    """One transactional id's state, producer, timeout and partitions."""
    from kafka.protocol.admin import DescribeTransactionsRequest  # noqa: PLC0415

    resp = _call(client, DescribeTransactionsRequest[0](transactional_ids=[transactional_id]))
    t = resp.transaction_states[0]
    if t.error_code:
        raise fail(f"{transactional_id}: error {t.error_code}")
    row = {
        "transactional_id": t.transactional_id, "state": t.transaction_state,
        "producer_id": t.producer_id, "producer_epoch": t.producer_epoch,
        "timeout_ms": t.transaction_timeout_ms, "start_time_ms": t.transaction_start_time_ms,
        "partitions": [f"{p.topic}-{i}" for p in t.topics for i in p.partitions],
    }  # fmt: skip
    if json_out:
        print_json(row)
        return
    table = Table(title=f"transaction {transactional_id}", show_header=False)
    for key, value in row.items():
        shown = _when(int(str(value))) if key == "start_time_ms" else value
        table.add_row(key, ", ".join(shown) if isinstance(shown, list) else str(shown))
    Console().print(table)


def _producer_at(client: ClientOptions, topic: str, partition: int, start: int) -> tuple[int, int]:
    """(producer id, epoch) of the transaction open at ``start`` (DescribeProducers)."""
    from kafka.protocol.admin import DescribeProducersRequest  # noqa: PLC0415

    req = DescribeProducersRequest[0](
        topics=[DescribeProducersRequest.TopicRequest(name=topic, partition_indexes=[partition])]
    )
    part = _call(client, req).topics[0].partitions[0]
    if part.error_code:
        raise fail(f"{topic}-{partition}: error {part.error_code}")
    for state in part.active_producers:
        if state.current_txn_start_offset == start:
            return int(state.producer_id), int(state.producer_epoch)
    raise fail(f"no open transaction starts at offset {start} of {topic}-{partition}")


@app.command("abort")
@client_command
def abort(  # noqa: PLR0917 (kafka-transactions.sh's options)
    topic: Annotated[str, typer.Option("--topic", help="The partition's topic.")],
    partition: Annotated[int, typer.Option("--partition", help="The partition.")],
    start_offset: Annotated[
        int | None, typer.Option("--start-offset", help="First offset of the transaction.")
    ] = None,
    producer_id: Annotated[int | None, typer.Option("--producer-id")] = None,
    producer_epoch: Annotated[int | None, typer.Option("--producer-epoch")] = None,
    coordinator_epoch: Annotated[int, typer.Option("--coordinator-epoch")] = -1,
    *,
    client: ClientOptions,
) -> None:
    """Abort a hanging transaction in one partition (an ABORT marker)."""
    from kafka.protocol.producer import WriteTxnMarkersRequest  # noqa: PLC0415

    if start_offset is not None:
        producer_id, producer_epoch = _producer_at(client, topic, partition, start_offset)
    if producer_id is None or producer_epoch is None:
        raise fail("give --start-offset, or --producer-id and --producer-epoch", 2)
    req = WriteTxnMarkersRequest[1]
    marker = req.WritableTxnMarker(
        producer_id=producer_id, producer_epoch=producer_epoch, transaction_result=False,
        topics=[req.WritableTxnMarker.WritableTxnMarkerTopic(
            name=topic, partition_indexes=[partition])],
        coordinator_epoch=coordinator_epoch,
    )  # fmt: skip
    resp = _call(client, req(markers=[marker]))
    code = resp.markers[0].topics[0].partitions[0].error_code
    if code:
        raise fail(f"{topic}-{partition}: error {code}")
    Console().print(
        f"aborted the transaction of producer {producer_id} (epoch {producer_epoch}) "
        f"in {topic}-{partition}"
    )


def register(root: typer.Typer) -> None:
    """Add the ``transactions`` command group to ``root``."""
    root.add_typer(app, name="transactions")
