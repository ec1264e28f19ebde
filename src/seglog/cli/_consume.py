"""What ``seglog consume TOPIC`` does (records from any Kafka-protocol broker to stdout,
kcat's ``-C``), without typer: the command (``_consume_cmd``) and the argparse start
(:func:`run_fast`, see ``_fast``) both call :func:`consume_records`.

Offsets (``-o``, kcat's spec): ``beginning``, ``end``, ``stored`` (the group's committed
offset), ``N`` (absolute), ``-N`` (N before the end of each partition), ``@TS`` or
``s@TS`` (first record at or after TS, ms since the epoch). Without ``-G`` the partitions
are assigned directly (all, or ``-p``); with ``-G GROUP`` the command joins the group,
starts from committed offsets (``-o beginning|end`` is then ``auto.offset.reset``) and
commits what it printed. ``-e`` exits once every partition is at its end; ``-c`` after N
records; Ctrl-C closes the consumer (leaving the group) and exits 0.

Output: ``-f`` with kcat's letters (``%t`` topic, ``%p`` partition, ``%o`` offset, ``%k``
key, ``%v`` value, ``%T`` timestamp ms, ``%h`` headers k=v,..., ``%K``/``%S`` key/value
length, ``%%``; escapes ``\\n \\t \\0``), raw bytes (binary-safe); or ``--json``, one object
per record whose key, value and header values are UTF-8 text, or base64 with
``"<field>_encoding": "base64"`` when they are not valid UTF-8.
"""

from __future__ import annotations

import base64
import json
import re
import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from seglog.cli._client_config import ClientOptions, print_json
from seglog.cli._fast import Parser, try_run

if TYPE_CHECKING:
    from seglog.cli._schema_io import AvroValues

VALUE_FORMATS = ("binary", "avro")
"""``--value-format`` choices (binary: the bytes as they are, the default)."""

__all__ = ["consume_records", "parse_offset_spec", "run_fast"]


def fail(message: str, code: int = 1) -> Exception:
    """``_fail.fail``, imported on the error path only (it brings typer and rich)."""
    from seglog.cli._fail import fail  # noqa: PLC0415

    return fail(message, code)


_FORMAT_TOKEN = re.compile(rb"%[tpokvThKS%]|\\[ntr0\\]")
_ESCAPES = {b"\\n": b"\n", b"\\t": b"\t", b"\\r": b"\r", b"\\0": b"\0", b"\\\\": b"\\"}


def parse_offset_spec(spec: str) -> tuple[str, int]:
    """``-o`` text → (kind, number): ("beginning", 0), ("end", 0), ("stored", 0),
    ("absolute", N), ("relative", N) for -N, ("timestamp", ms). Raises ValueError."""
    text = spec.strip()
    if text in ("beginning", "end", "stored"):
        return text, 0
    if text.startswith(("@", "s@")):
        return "timestamp", int(text.split("@", 1)[1])
    number = int(text)
    return ("relative", -number) if number < 0 else ("absolute", number)


def _render(fmt: bytes, msg: Any) -> bytes:
    def token(m: re.Match[bytes]) -> bytes:
        tok = m.group(0)
        if tok in _ESCAPES:
            return _ESCAPES[tok]
        letter = tok[1:2]
        key, value = msg.key() or b"", msg.value() or b""
        if letter == b"t":
            return str(msg.topic()).encode()
        if letter == b"p":
            return str(msg.partition()).encode()
        if letter == b"o":
            return str(msg.offset()).encode()
        if letter == b"k":
            return bytes(key)
        if letter == b"v":
            return bytes(value)
        if letter == b"T":
            return str(msg.timestamp()[1]).encode()
        if letter == b"K":
            return str(len(key) if msg.key() is not None else -1).encode()
        if letter == b"S":
            return str(len(value) if msg.value() is not None else -1).encode()
        if letter == b"h":
            return b",".join(k.encode() + b"=" + (v or b"") for k, v in msg.headers() or [])
        return b"%"

    return _FORMAT_TOKEN.sub(token, fmt)


def _text_or_b64(out: dict[str, Any], field: str, data: bytes | None) -> None:
    if data is None:
        out[field] = None
        return
    try:
        out[field] = bytes(data).decode()
    except UnicodeDecodeError:
        out[field] = base64.b64encode(data).decode()
        out[f"{field}_encoding"] = "base64"


def _as_json(msg: Any, value_json: bool = False) -> dict[str, Any]:
    """One record as a JSON object; ``value_json``: the value is JSON text (a decoded Avro
    value) and is embedded as JSON, not as a string."""
    out: dict[str, Any] = {
        "topic": msg.topic(),
        "partition": msg.partition(),
        "offset": msg.offset(),
        "timestamp": msg.timestamp()[1],
    }
    _text_or_b64(out, "key", msg.key())
    if value_json and msg.value() is not None:
        out["value"] = json.loads(msg.value())
    else:
        _text_or_b64(out, "value", msg.value())
    headers = []
    for name, value in msg.headers() or []:
        h: dict[str, Any] = {"key": name}
        _text_or_b64(h, "value", value)
        headers.append(h)
    out["headers"] = headers
    return out


def _start_offsets(
    consumer: Any, topic: str, partitions: list[int], kind: str, n: int
) -> list[Any]:
    from confluent_kafka import OFFSET_BEGINNING, OFFSET_END, OFFSET_STORED, TopicPartition  # noqa: PLC0415

    if kind == "timestamp":
        asked = [TopicPartition(topic, p, n) for p in partitions]
        return list(consumer.offsets_for_times(asked, timeout=30))
    tps = []
    for p in partitions:
        if kind == "relative":
            low, high = consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=30)
            offset = max(low, high - n)
        else:
            offset = {
                "beginning": OFFSET_BEGINNING,
                "end": OFFSET_END,
                "stored": OFFSET_STORED,
            }.get(kind, n)
        tps.append(TopicPartition(topic, p, offset))
    return tps


def _store(consumer: Any, batch: list[Any]) -> None:
    """Store the next offset of the last record printed per partition (committed by the
    group's auto commit and at close)."""
    from confluent_kafka import TopicPartition  # noqa: PLC0415

    last: dict[tuple[str, int], int] = {}
    for msg in batch:
        if msg.error() is None:
            last[(msg.topic(), msg.partition())] = msg.offset()
    if last:
        consumer.store_offsets(offsets=[TopicPartition(t, p, o + 1) for (t, p), o in last.items()])


def _print_in_order(  # noqa: PLR0917
    batch: list[Any],
    at_end: set[tuple[str, int]],
    out: Any,
    template: bytes,
    json_out: bool,
    value_json: bool = False,
) -> int:
    """Print a batch that holds partition-end events (or errors) record by record, keeping
    ``at_end`` in order (an end event, then a newer record, means not at the end); raises
    ``typer.Exit(1)`` on an error. Returns the number of records printed."""
    from confluent_kafka import KafkaError  # noqa: PLC0415

    chunks: list[bytes] = []
    printed = 0
    for msg in batch:
        err = msg.error()
        if err is not None:
            if err.code() == KafkaError._PARTITION_EOF:
                at_end.add((str(msg.topic()), int(msg.partition())))
                continue
            raise fail(err.str())
        at_end.discard((str(msg.topic()), int(msg.partition())))
        if json_out:
            print_json(_as_json(msg, value_json))
        else:
            chunks.append(_render(template, msg))
        printed += 1
    if chunks:
        out.write(b"".join(chunks))
        out.flush()
    return printed


def consume_records(  # noqa: PLR0917 (one loop, kcat's options)
    topic: str,
    offset: str,
    partitions: Sequence[int] | None,
    count: int | None,
    exit_at_end: bool,
    group: str | None,
    fmt: str,
    json_out: bool,
    value_format: str,
    schema_registry_url: str | None,
    client: ClientOptions,
) -> None:
    """Print the records of ``topic`` from ``offset`` (see the module docstring) until
    ``count`` records, the end (``exit_at_end``) or Ctrl-C; with ``value_format`` avro,
    each value decoded by its schema id (``_schema_io``) and printed as JSON. Raises
    ``typer.Exit``: 2 on a bad ``-o``, an unknown partition, ``-o stored`` without a group
    or a bad ``--value-format``; 1 on a Kafka error or an undecodable value."""
    from confluent_kafka import Consumer, KafkaException  # noqa: PLC0415

    try:
        kind, number = parse_offset_spec(offset)
    except ValueError:
        raise fail(
            f"-o {offset!r}: expected beginning, end, stored, N, -N or @TIMESTAMP_MS", 2
        ) from None
    if group is None and kind == "stored":
        raise fail("-o stored needs a group (-G)", 2)
    conf = client.config(
        **{
            "group.id": group or "seglog-cli",
            "enable.auto.commit": group is not None,
            "enable.auto.offset.store": False,
            "enable.partition.eof": exit_at_end,
            # librdkafka waits this long before fetching again once its local queue is
            # over queued.min.messages: 1 s by default, which throttles a batch reader
            "fetch.queue.backoff.ms": 0,
            # an -o N out of range (past the end) resets to the end, as kcat and Kafka's
            # console consumer do: not to the beginning, records before N were not asked for
            "auto.offset.reset": (
                "latest" if kind == "end" or (kind == "absolute" and group is None) else "earliest"
            ),
        }
    )
    try:
        consumer = Consumer(conf)
    except KafkaException as exc:  # a bad -X value: one line, not a traceback
        raise fail(exc.args[0].str()) from None
    avro = _avro_values(topic, value_format, schema_registry_url, conf)
    out = sys.stdout.buffer
    template = fmt.encode()
    printed = 0
    at_end: set[tuple[str, int]] = set()
    try:
        if group is not None:
            consumer.subscribe([topic])
        else:
            meta = consumer.list_topics(topic, timeout=30).topics.get(topic)
            if meta is None or meta.error is not None:
                raise fail(f"topic {topic!r}: {meta.error.str() if meta else 'unknown'}")
            chosen = sorted(partitions) if partitions else sorted(meta.partitions)
            unknown = set(chosen) - set(meta.partitions)
            if unknown:
                raise fail(f"topic {topic!r} has no partition(s) {sorted(unknown)}", 2)
            consumer.assign(_start_offsets(consumer, topic, chosen, kind, number))
        plain_values = template == b"%v\\n" and not json_out  # kcat's default output
        while count is None or printed < count:
            want = 1000 if count is None else min(1000, count - printed)
            batch = consumer.consume(want, 0.5)
            if avro is not None:
                _decode_values(avro, batch)
            if any(msg.error() is not None for msg in batch):
                printed += _print_in_order(batch, at_end, out, template, json_out, avro is not None)
            elif batch:
                # records only (the common case): a list per batch, no per-record branches
                if at_end:
                    for msg in batch:
                        at_end.discard((str(msg.topic()), int(msg.partition())))
                if json_out:
                    for msg in batch:
                        print_json(_as_json(msg, avro is not None))
                elif plain_values:
                    out.write(b"\n".join([msg.value() or b"" for msg in batch]) + b"\n")
                    out.flush()
                else:
                    out.write(b"".join([_render(template, msg) for msg in batch]))
                    out.flush()
                printed += len(batch)
            if group is not None and batch:
                _store(consumer, batch)
            if exit_at_end and at_end:
                assigned = {(tp.topic, tp.partition) for tp in consumer.assignment()}
                if assigned and assigned <= at_end:
                    break
    except KeyboardInterrupt:
        pass  # Ctrl-C: close below (commits and leaves the group), exit 0
    except KafkaException as exc:
        raise fail(str(exc.args[0])) from None
    finally:
        consumer.close()


def _avro_values(
    topic: str, value_format: str, url: str | None, conf: dict[str, Any]
) -> AvroValues | None:
    """The Avro decoder of ``--value-format avro`` (None for binary)."""
    if value_format not in VALUE_FORMATS:
        raise fail(f"--value-format {value_format!r}: expected {' or '.join(VALUE_FORMATS)}", 2)
    if value_format == "binary":
        return None
    # pyarrow, fastavro and the registry client: only for Avro (the fast start stays fast)
    from seglog.cli._schema_io import AvroValues  # noqa: PLC0415

    try:
        return AvroValues(topic, url, conf)
    except ValueError as exc:
        raise fail(str(exc), 2) from None


def _decode_values(avro: AvroValues, batch: list[Any]) -> None:
    """Replace each record's value by the JSON text of its decoded Avro value."""
    for msg in batch:
        if msg.error() is None and msg.value() is not None:
            try:
                decoded = avro.decode(msg.value())
            except Exception as exc:
                raise fail(
                    f"{msg.topic()}-{msg.partition()} offset {msg.offset()}: not Avro of a "
                    f"registered schema ({exc})"
                ) from None
            msg.set_value(avro.json_text(decoded).encode())


def _fast_parser() -> Parser:
    """The options of ``_consume_cmd.consume``, with their dests named as typer names them
    (tests/cli/test_fast_start.py checks both accept the same options)."""
    parser = Parser("seglog consume")
    add = parser.add_argument
    add("topic")
    add("-o", "--offset", default="beginning")
    add("-p", "--partition", dest="partitions", type=int, action="append")
    add("-c", "--count", type=int)
    add("-e", "--exit", dest="exit_at_end", action="store_true")
    add("-G", "--group")
    add("-f", "--format", dest="fmt", default="%v\\n")
    add("--json", dest="json_out", action="store_true")
    add("--value-format", default="binary")
    add("--schema-registry-url")
    return parser


def run_fast(argv: Sequence[str]) -> bool:
    """Run ``seglog consume ARGV`` without typer (``_fast``); False (nothing done) when
    argparse leaves ``argv`` to typer."""
    return try_run(_fast_parser(), consume_records, argv)
