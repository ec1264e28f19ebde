"""Avro schemas: parsing (fastavro), the forms a schema is stored and compared in, and
compatibility by Avro's schema-resolution rules (the Avro 1.11 specification, "Schema
Resolution"; Java's ``SchemaCompatibility`` is the reference implementation Confluent
uses).

``reader_errors(reader, writer)`` lists why data written with ``writer`` cannot be read
with ``reader`` (empty: it can):

- both primitives of one type, or a writer type promoted to the reader's: int → long,
  float, double; long → float, double; float → double; string ↔ bytes;
- records of one (unqualified) name, or a reader alias naming the writer: every reader
  field is either in the writer (by name or a reader field alias; the types resolve) or
  has a default; writer fields the reader lacks are skipped;
- enums of one name: every writer symbol is a reader symbol, unless the reader has a
  default symbol; fixed of one name and size; arrays and maps by their items / values;
- a writer union: each of its branches resolves against the reader; a reader union: the
  writer (a non-union) resolves against one of its branches.

Logical types are resolved as their underlying types (the specification's rule: a reader
that does not know one ignores it).
"""

from __future__ import annotations

import json
from typing import Any

import fastavro
from fastavro.schema import to_parsing_canonical_form

__all__ = ["ParsedAvro", "parse_avro", "reader_errors"]

_PRIMITIVES = frozenset({"null", "boolean", "int", "long", "float", "double", "bytes", "string"})
_PROMOTIONS = frozenset({
    ("int", "long"), ("int", "float"), ("int", "double"), ("long", "float"),
    ("long", "double"), ("float", "double"), ("string", "bytes"), ("bytes", "string"),
})  # fmt: skip
_NAMED = ("record", "enum", "fixed", "error")


class ParsedAvro:
    """A parsed Avro schema: fastavro's parsed form, its named types (references'
    included), and its Parsing Canonical Form (the Avro specification's)."""

    def __init__(self, parsed: Any, named: dict[str, Any]) -> None:
        self.parsed = parsed
        self.named = named

    @property
    def canonical(self) -> str:
        """The Parsing Canonical Form (the Avro specification's), named types from
        references inlined at their first use."""
        return str(to_parsing_canonical_form(_inline(self.parsed, self.named, set())))


def _inline(schema: Any, named: dict[str, Any], seen: set[str]) -> Any:
    """``schema`` with references to named types defined elsewhere (``named``) replaced
    by their definitions, once each (later uses stay names, as Avro requires)."""
    if isinstance(schema, str):
        if schema in named and schema not in seen:
            seen.add(schema)
            return _inline(named[schema], named, seen)
        return schema
    if isinstance(schema, list):
        return [_inline(s, named, seen) for s in schema]
    if isinstance(schema, dict):
        if "name" in schema and schema.get("type") in _NAMED:
            seen.add(str(schema["name"]))
        out = dict(schema)
        for key in ("type", "items", "values"):
            if key in out and not (key == "type" and out[key] in _NAMED):
                out[key] = _inline(out[key], named, seen)
        if "fields" in out:
            out["fields"] = [{**f, "type": _inline(f["type"], named, seen)} for f in out["fields"]]
        return out
    return schema


def parse_avro(text: str, references: list[str]) -> ParsedAvro:
    """Parse ``text`` after the referenced schemas' texts (their named types become
    available to it, Confluent's Avro references). Raises ValueError naming the problem."""
    named: dict[str, Any] = {}
    try:
        for ref in references:
            fastavro.parse_schema(json.loads(ref), named_schemas=named, _write_hint=False)
        doc = json.loads(text)
        parsed = fastavro.parse_schema(doc, named_schemas=named, _write_hint=False)
    except json.JSONDecodeError as exc:
        raise ValueError(f"Invalid schema: not JSON: {exc}") from None
    except Exception as exc:  # fastavro raises SchemaParseException, UnknownType, ...
        raise ValueError(f"Invalid Avro schema: {exc}") from None
    return ParsedAvro(parsed, named)


def _kind(schema: Any) -> str:
    if isinstance(schema, list):
        return "union"
    if isinstance(schema, dict):
        kind = schema["type"]
        return "record" if kind == "error" else str(kind) if isinstance(kind, str) else "?"
    return str(schema)


def _resolve(schema: Any, named: dict[str, Any]) -> Any:
    while isinstance(schema, str) and schema not in _PRIMITIVES and schema in named:
        schema = named[schema]
    if isinstance(schema, dict) and isinstance(schema.get("type"), (dict, list)):
        return _resolve(schema["type"], named)
    if isinstance(schema, dict) and schema.get("type") in _PRIMITIVES:
        return schema["type"]  # {"type": "long", "logicalType": ...} resolves as long
    return schema


def _short(name: str) -> str:
    return name.rsplit(".", 1)[-1]


def _names_match(reader: dict[str, Any], writer: dict[str, Any]) -> bool:
    wanted = _short(str(writer["name"]))
    return wanted in {_short(str(n)) for n in [reader["name"], *(reader.get("aliases") or ())]}


class _Check:
    def __init__(self, reader_named: dict[str, Any], writer_named: dict[str, Any]) -> None:
        self.rn, self.wn = reader_named, writer_named
        self.seen: set[tuple[str, str]] = set()

    def errors(self, reader: Any, writer: Any, path: str) -> list[str]:
        r, w = _resolve(reader, self.rn), _resolve(writer, self.wn)
        rk, wk = _kind(r), _kind(w)
        if wk == "union":
            return [e for i, b in enumerate(w) for e in self.errors(r, b, f"{path}/{i}")]
        if rk == "union":
            for branch in r:
                if not self.errors(branch, w, path):
                    return []
            return [f"{path}: writer type {wk} matches no branch of the reader's union"]
        if rk != wk:
            if (wk, rk) in _PROMOTIONS:
                return []
            return [f"{path}: reader type {rk} cannot read writer type {wk}"]
        if rk in _NAMED or rk == "record":
            if not _names_match(r, w):
                return [f"{path}: reader name {r['name']} does not match writer name {w['name']}"]
            pair = (str(r["name"]), str(w["name"]))
            if pair in self.seen:  # a recursive type: already being compared
                return []
            self.seen.add(pair)
        if rk == "record":
            return self._record(r, w, path)
        if rk == "enum":
            missing = [s for s in w["symbols"] if s not in r["symbols"]]
            if missing and "default" not in r:
                return [f"{path}: reader enum lacks writer symbols {missing} and has no default"]
        elif rk == "fixed" and r["size"] != w["size"]:
            return [f"{path}: fixed size {w['size']} read as size {r['size']}"]
        elif rk == "array":
            return self.errors(r["items"], w["items"], f"{path}/items")
        elif rk == "map":
            return self.errors(r["values"], w["values"], f"{path}/values")
        return []

    def _record(self, r: dict[str, Any], w: dict[str, Any], path: str) -> list[str]:
        writer_fields = {str(f["name"]): f for f in w["fields"]}
        out: list[str] = []
        for field in r["fields"]:
            names = [field["name"], *(field.get("aliases") or ())]
            found = next((writer_fields[n] for n in names if n in writer_fields), None)
            where = f"{path}/fields/{field['name']}"
            if found is None:
                if "default" not in field:
                    out.append(f"{where}: reader field missing from the writer has no default")
                continue
            out += self.errors(field["type"], found["type"], where)
        return out


def reader_errors(reader: ParsedAvro, writer: ParsedAvro) -> list[str]:
    """Why data written with ``writer`` cannot be read with ``reader`` (Avro's schema
    resolution; empty when it can)."""
    return _Check(reader.named, writer.named).errors(reader.parsed, writer.parsed, "")
