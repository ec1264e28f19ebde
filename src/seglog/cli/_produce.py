"""What ``seglog produce`` does, without typer: the command (``_produce_cmd``) and the
argparse start (:func:`run_fast`, see ``_fast``) both call :func:`produce_records`.

Input is split into records on a delimiter (newline by default, ``-D`` to change, bytes
kept exactly: no decoding, so binary values survive with a delimiter that is not in them);
``-K DELIM`` splits each record into key and value at the first DELIM; ``--json-input``
reads JSON lines ``{"key": ..., "value": ..., "headers": {...}, "partition": N}`` instead.
With ``--json`` one line per delivered record reports topic, partition and offset.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, BinaryIO

from seglog.cli._client_config import ClientOptions, print_json
from seglog.cli._fast import Parser, try_run

if TYPE_CHECKING:
    from seglog.cli._schema_io import AvroValues

VALUE_FORMATS = ("binary", "avro")
"""``--value-format`` choices (binary: the bytes as they are, the default)."""

__all__ = ["produce_records", "run_fast"]


def _fail(message: str, code: int = 1) -> Exception:
    """``_fail.fail``, imported on the error path only (it brings typer and rich)."""
    from seglog.cli._fail import fail  # noqa: PLC0415

    return fail(message, code)


def _unescape(text: str) -> bytes:
    return text.encode().decode("unicode_escape").encode("latin-1")


def _blocks(stream: BinaryIO, delimiter: bytes) -> Iterator[list[bytes]]:
    """Records split on ``delimiter``, a list per 1 MiB read (a loop over lists costs less
    per record than a generator of single records)."""
    pending = b""
    while True:
        block = stream.read(1 << 20)
        if not block:
            break
        records = (pending + block).split(delimiter) if pending else block.split(delimiter)
        pending = records.pop()
        yield records
    if pending:
        yield [pending]


def _chunks(stream: BinaryIO, delimiter: bytes) -> Iterator[bytes]:
    for records in _blocks(stream, delimiter):
        yield from records


def _json_record(line: bytes, number: int) -> dict[str, Any]:
    try:
        doc = json.loads(line)
    except ValueError as exc:
        raise _fail(f"line {number}: not JSON ({exc})", 2) from None
    if not isinstance(doc, dict):
        raise _fail(f"line {number}: expected a JSON object with key/value/headers", 2)

    def as_bytes(value: object) -> bytes | None:
        if value is None:
            return None
        if isinstance(value, str):
            return value.encode()
        return json.dumps(value).encode()

    headers = doc.get("headers") or {}
    return {
        "key": as_bytes(doc.get("key")),
        "value": as_bytes(doc.get("value")),
        "headers": [(str(k), as_bytes(v)) for k, v in dict(headers).items()],
        "partition": doc.get("partition"),
    }


_Record = tuple[bytes | None, bytes | None, list[tuple[str, bytes | None]], int | None]


def _records(  # noqa: PLR0917 (internal: the options that shape a record)
    chunks: Iterator[bytes],
    json_input: bool,
    key_split: bytes | None,
    fixed_key: bytes | None,
    headers: list[tuple[str, bytes | None]],
    partition: int | None,
) -> Iterator[_Record]:
    """(key, value, headers, partition) per input record, for the general case."""
    for number, chunk in enumerate(chunks, 1):
        if json_input:
            if not chunk.strip():
                continue
            rec = _json_record(chunk, number)
            target = rec["partition"]
            yield (
                rec["key"], rec["value"], headers + rec["headers"],
                partition if target is None else int(target),
            )  # fmt: skip
        elif key_split is not None:
            k_part, found, v_part = chunk.partition(key_split)
            yield (
                (k_part, v_part, headers, partition) if found else (None, chunk, headers, partition)
            )
        else:
            yield fixed_key, chunk, headers, partition


def _produce_each(producer: Any, topic: str, records: Iterator[_Record]) -> int:
    """Produce records with their own key, headers and partition; returns the count."""
    count = 0
    for k, v, extra, target in records:
        while True:
            try:
                producer.produce(
                    topic, v, k, partition=-1 if target is None else target, headers=extra or None
                )
                break
            except BufferError:
                producer.poll(0.1)  # local queue full: serve deliveries, then retry
        count += 1
        if not count % 1024:
            producer.poll(0)  # serve delivery reports (--json prints them) as they come
    return count


def _produce_values(
    producer: Any, topic: str, blocks: Iterator[list[bytes]], key: bytes | None
) -> int:
    """The common case (values, one optional key, the partitioner's choice) in a loop with
    nothing but the produce call: confluent-kafka's per-call cost (~0.7 us) is the floor of
    ``seglog produce`` (benchmarks/cli_vs_kcat.py). Returns the count."""
    produce, poll = producer.produce, producer.poll
    count = 0
    for values in blocks:
        for value in values:
            try:
                produce(topic, value, key)
            except BufferError:
                while True:
                    poll(0.1)  # local queue full: serve deliveries, then retry
                    try:
                        produce(topic, value, key)
                        break
                    except BufferError:
                        continue
        count += len(values)
    return count


def produce_records(  # noqa: PLR0917 (the command's options, one by one)
    topic: str,
    files: Sequence[Path] | None,
    key: str | None,
    key_delimiter: str | None,
    delimiter: str,
    header: Sequence[str] | None,
    partition: int | None,
    compression: str,
    acks: str,
    json_input: bool,
    json_out: bool,
    value_format: str,
    value_schema: Path | None,
    schema_registry_url: str | None,
    client: ClientOptions,
) -> None:
    """Produce the records of ``files`` (stdin when empty) to ``topic`` and wait for every
    delivery (60 s at most); with ``value_format`` avro each value is JSON, written as
    Confluent-framed Avro of ``value_schema`` (``_schema_io``). Raises ``typer.Exit``: 2 on
    bad input (``-H`` without ``=``, a file that cannot be opened, a JSON line that is not
    an object, a value the schema refuses), 1 on a Kafka error or a failed or late
    delivery."""
    from confluent_kafka import KafkaError, KafkaException, Producer  # noqa: PLC0415

    headers: list[tuple[str, bytes | None]] = []
    for item in header or ():
        name, sep, value = item.partition("=")
        if not sep:
            raise _fail(f"-H {item!r}: expected key=value", 2)
        headers.append((name, value.encode()))
    failures: list[str] = []

    def delivered(err: KafkaError | None, msg: Any) -> None:
        if err is not None:
            failures.append(err.str())
        elif json_out:
            print_json({"topic": msg.topic(), "partition": msg.partition(), "offset": msg.offset()})

    config = client.config(
        **{
            "compression.type": compression,
            "acks": acks,
            "linger.ms": 20,
            # a local queue as deep as kcat's use of it: the loop below rarely waits
            "queue.buffering.max.messages": 1_000_000,
            "queue.buffering.max.kbytes": 1_048_576,
            # no idempotence, as kcat and librdkafka's default: librdkafka 2.16 asks for a
            # producer id only once a broker connection is up and otherwise retries on a
            # 500 ms timer, and the bootstrap connection is dropped as soon as the cluster
            # metadata names the brokers, so an idempotent start waited 0.1-1.0 s (half of
            # a 1 M-line run). -X enable.idempotence=true turns it on.
            "on_delivery": delivered,  # one callback for all records, not one per call
            "delivery.report.only.error": not json_out,
        }
    )
    try:
        producer = Producer(config)
    except KafkaException as exc:  # a bad -X or -z value: one line, not a traceback
        raise _fail(exc.args[0].str()) from None
    avro = _avro_values(topic, value_format, value_schema, schema_registry_url, config)
    split = _unescape(delimiter)
    key_split = None if key_delimiter is None else _unescape(key_delimiter)
    fixed_key = None if key is None else key.encode()
    sources: list[BinaryIO] = [sys.stdin.buffer] if not files else []
    count = 0
    try:
        for path in files or ():
            try:
                sources.append(path.open("rb"))
            except OSError as exc:
                raise _fail(f"{path}: {exc.strerror}", 2) from None
        for source in sources:
            general = json_input or key_split is not None or headers or partition is not None
            if json_out or general or avro is not None:
                records = _records(
                    _chunks(source, split), json_input, key_split, fixed_key, headers, partition
                )
                if avro is not None:
                    records = _encoded(avro, records)
                count += _produce_each(producer, topic, records)
            else:
                count += _produce_values(producer, topic, _blocks(source, split), fixed_key)
        remaining = producer.flush(60)
    except KafkaException as exc:
        raise _fail(str(exc.args[0])) from None
    finally:
        for source in sources:
            if source is not sys.stdin.buffer:
                source.close()
    if remaining:
        raise _fail(f"{remaining} record(s) not delivered within 60 s")
    if failures:
        raise _fail(f"{len(failures)} of {count} record(s) failed: {failures[0]}")


def _avro_values(
    topic: str, value_format: str, schema: Path | None, url: str | None, conf: dict[str, Any]
) -> AvroValues | None:
    """The Avro serializer of ``--value-format avro`` (None for binary)."""
    if value_format not in VALUE_FORMATS:
        raise _fail(f"--value-format {value_format!r}: expected {' or '.join(VALUE_FORMATS)}", 2)
    if value_format == "binary":
        if schema is not None:
            raise _fail("--value-schema needs --value-format avro", 2)
        return None
    # pyarrow, fastavro and the registry client: only for Avro (the fast start stays fast)
    from seglog.cli._schema_io import AvroValues  # noqa: PLC0415

    if schema is None:
        raise _fail("--value-format avro needs --value-schema FILE", 2)
    try:
        avro = AvroValues(topic, url, conf)
        avro.use_schema(schema)
    except OSError as exc:
        raise _fail(f"{schema}: {exc.strerror}", 2) from None
    except ValueError as exc:
        raise _fail(str(exc), 2) from None
    return avro


def _encoded(avro: AvroValues, records: Iterator[_Record]) -> Iterator[_Record]:
    """Records whose value (a JSON document) is replaced by its Avro encoding."""
    for number, (k, value, extra, target) in enumerate(records, 1):
        v = value
        if v is not None:
            try:
                v = avro.encode(json.loads(v))
            except ValueError as exc:
                raise _fail(f"record {number}: {exc}", 2) from None
            except Exception as exc:
                raise _fail(f"record {number} does not fit the schema: {exc}", 2) from None
        yield k, v, extra, target


def _fast_parser() -> Parser:
    """The options of ``_produce_cmd.produce``, with their dests named as typer names them
    (tests/cli/test_fast_start.py checks both accept the same options)."""
    parser = Parser("seglog produce")
    add = parser.add_argument
    add("topic")
    add("files", nargs="*", type=Path)
    add("-k", "--key")
    add("-K", dest="key_delimiter")
    add("-D", "--delimiter", default="\\n")
    add("-H", "--header", action="append")
    add("-p", "--partition", type=int)
    add("-z", "--compression", default="none")
    add("--acks", default="all")
    add("--json-input", action="store_true")
    add("--json", dest="json_out", action="store_true")
    add("--value-format", default="binary")
    add("--value-schema", type=Path)
    add("--schema-registry-url")
    return parser


def run_fast(argv: Sequence[str]) -> bool:
    """Run ``seglog produce ARGV`` without typer (``_fast``); False (nothing done) when
    argparse leaves ``argv`` to typer."""
    return try_run(_fast_parser(), produce_records, argv)
