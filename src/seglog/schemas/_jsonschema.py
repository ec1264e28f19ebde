"""JSON Schema: parsing (jsonschema's meta-schema check) and compatibility, the reading of
Confluent's JSON Schema rules this module implements.

``reader_errors(reader, writer)`` lists why a document valid under ``writer`` may be
invalid under ``reader`` (empty: every one is valid, the reader is at least as wide).
Confluent names the same cases (its ``Difference.Type``):

- ``TYPE_NARROWED`` / ``TYPE_CHANGED``: the reader's ``type`` must include every writer
  type (``integer`` is within ``number``); a reader ``type`` where the writer had none;
- ``REQUIRED_ATTRIBUTE_ADDED``: a property the reader requires and the writer did not;
- ``PROPERTY_REMOVED_FROM_CLOSED_CONTENT_MODEL``: a writer property the reader lacks,
  while the reader's ``additionalProperties`` does not accept its schema;
- ``PROPERTY_ADDED_TO_OPEN_CONTENT_MODEL``: a reader property the writer lacks, while the
  writer's ``additionalProperties`` lets documents carry it with values the reader's schema
  refuses (an open writer: anything); a closed writer (``additionalProperties: false``)
  makes additions compatible;
- ``ADDITIONAL_PROPERTIES_NARROWED``: the reader's ``additionalProperties`` refuses what
  the writer's accepted;
- ``ENUM_ARRAY_NARROWED``, ``MAXIMUM_DECREASED``, ``MINIMUM_INCREASED``,
  ``MAX_LENGTH_DECREASED``, ``MIN_LENGTH_INCREASED``, ``MAX_ITEMS_DECREASED``,
  ``MIN_ITEMS_INCREASED``, ``PATTERN_CHANGED``, ``FORMAT_CHANGED``, ``CONST_CHANGED``;
- ``items``, ``properties`` and ``additionalProperties`` subschemas compared recursively.

Annotations (``title``, ``description``, ``default``, ``$id``, ...) never matter. Any
other keyword (``oneOf``, ``anyOf``, ``allOf``, ``not``, ``$ref``, ``if``,
``patternProperties``, ``dependentRequired``, tuple ``items``...) that the reader carries
with a value other than the writer's raises :class:`Unsupported`: the registry then
refuses the check (42203) rather than guess. A keyword only the writer has only narrows
the writer's documents, so ignoring it never answers "compatible" wrongly.
"""

from __future__ import annotations

import json
from typing import Any

import jsonschema
from jsonschema.exceptions import SchemaError

__all__ = ["Unsupported", "parse_json_schema", "reader_errors"]

_ANNOTATIONS = frozenset({
    "title", "description", "default", "examples", "$schema", "$id", "id", "$comment",
    "readOnly", "writeOnly", "deprecated", "definitions", "$defs",
})  # fmt: skip
_HANDLED = frozenset({
    "type", "properties", "required", "additionalProperties", "items", "enum", "const",
    "minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "minLength",
    "maxLength", "minItems", "maxItems", "pattern", "format",
})  # fmt: skip
_LOWER = {"minimum": "MINIMUM_INCREASED", "exclusiveMinimum": "EXCLUSIVE_MINIMUM_INCREASED",
          "minLength": "MIN_LENGTH_INCREASED", "minItems": "MIN_ITEMS_INCREASED"}  # fmt: skip
_UPPER = {"maximum": "MAXIMUM_DECREASED", "exclusiveMaximum": "EXCLUSIVE_MAXIMUM_DECREASED",
          "maxLength": "MAX_LENGTH_DECREASED", "maxItems": "MAX_ITEMS_DECREASED"}  # fmt: skip
_ALL_TYPES = frozenset({"null", "boolean", "object", "array", "number", "string", "integer"})


class Unsupported(Exception):  # noqa: N818 (a refusal, not a failure)
    """A reader keyword whose compatibility rule is not implemented (its name in
    ``keyword``, where in ``path``)."""

    def __init__(self, keyword: str, path: str) -> None:
        super().__init__(
            f"compatibility of JSON Schema keyword {keyword!r} (changed at {path or '#'}) "
            "is not implemented: use compatibility NONE for this subject"
        )
        self.keyword = keyword
        self.path = path


def parse_json_schema(text: str) -> Any:
    """The schema document of ``text``, checked against its draft's meta-schema (draft 7
    when ``$schema`` names none). Raises ValueError naming the problem."""
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ValueError(f"Invalid schema: not JSON: {exc}") from None
    if not isinstance(doc, (dict, bool)):
        raise ValueError("Invalid JSON Schema: not an object or a boolean")
    try:
        cls = jsonschema.validators.validator_for(doc, default=jsonschema.Draft7Validator)
        cls.check_schema(doc)
    except SchemaError as exc:
        raise ValueError(f"Invalid JSON Schema: {exc.message}") from None
    return doc


def _types(schema: dict[str, Any]) -> frozenset[str] | None:
    t = schema.get("type")
    if t is None:
        return None
    return frozenset([t] if isinstance(t, str) else t)


def _accepts_all(schema: Any) -> bool:
    return schema is True or (isinstance(schema, dict) and not (set(schema) - _ANNOTATIONS))


def reader_errors(reader: Any, writer: Any, path: str = "#") -> list[str]:
    """Why a document valid under ``writer`` may fail ``reader`` (empty: none can).
    Raises :class:`Unsupported`."""
    if _accepts_all(reader) or writer is False or reader == writer:
        return []
    if reader is False:
        return [f"SCHEMA_NARROWED {path}: the reader accepts nothing"]
    if writer is True:
        writer = {}
    for key, value in reader.items():
        if key not in _HANDLED and key not in _ANNOTATIONS and value != writer.get(key):
            raise Unsupported(key, path)
    out: list[str] = []
    r_types, w_types = _types(reader), _types(writer)
    if r_types is not None:
        widened = set(r_types) | ({"integer"} if "number" in r_types else set())
        if w_types is None or not w_types <= widened:
            out.append(f"TYPE_NARROWED {path}: {sorted(w_types or _ALL_TYPES)} read as "
                       f"{sorted(r_types)}")  # fmt: skip
    out += _values(reader, writer, path)
    out += _objects(reader, writer, path)
    if "items" in reader:
        items = reader["items"]
        if isinstance(items, list) or isinstance(writer.get("items"), list):
            if items != writer.get("items"):
                raise Unsupported("items", path)
        else:
            out += reader_errors(items, writer.get("items", True), f"{path}/items")
    return out


def _values(reader: dict[str, Any], writer: dict[str, Any], path: str) -> list[str]:
    out: list[str] = []
    if "enum" in reader:
        allowed = writer.get("enum", [writer["const"]] if "const" in writer else None)
        if allowed is None or any(v not in reader["enum"] for v in allowed):
            out.append(f"ENUM_ARRAY_NARROWED {path}")
    if "const" in reader:
        allowed = writer.get("enum", [writer["const"]] if "const" in writer else None)
        if allowed is None or any(v != reader["const"] for v in allowed):
            out.append(f"CONST_CHANGED {path}")
    for key, name in _LOWER.items():
        if key in reader and not (key in writer and writer[key] >= reader[key]):
            out.append(f"{name} {path}: {key} {writer.get(key)} -> {reader[key]}")
    for key, name in _UPPER.items():
        if key in reader and not (key in writer and writer[key] <= reader[key]):
            out.append(f"{name} {path}: {key} {writer.get(key)} -> {reader[key]}")
    for key in ("pattern", "format"):
        if key in reader and reader[key] != writer.get(key):
            out.append(f"{key.upper()}_CHANGED {path}")
    return out


def _objects(reader: dict[str, Any], writer: dict[str, Any], path: str) -> list[str]:
    out: list[str] = []
    r_props: dict[str, Any] = reader.get("properties", {})
    w_props: dict[str, Any] = writer.get("properties", {})
    r_extra = reader.get("additionalProperties", True)
    w_extra = writer.get("additionalProperties", True)
    for name, schema in w_props.items():
        where = f"{path}/properties/{name}"
        if name in r_props:
            out += reader_errors(r_props[name], schema, where)
        elif reader_errors(r_extra, schema, where):
            out.append(f"PROPERTY_REMOVED_FROM_CLOSED_CONTENT_MODEL {where}")
    for name, schema in r_props.items():
        if name not in w_props and reader_errors(schema, w_extra, f"{path}/properties/{name}"):
            out.append(f"PROPERTY_ADDED_TO_OPEN_CONTENT_MODEL {path}/properties/{name}")
    if reader_errors(r_extra, w_extra, f"{path}/additionalProperties"):
        out.append(f"ADDITIONAL_PROPERTIES_NARROWED {path}")
    added = sorted(set(reader.get("required", ())) - set(writer.get("required", ())))
    if added:
        out.append(f"REQUIRED_ATTRIBUTE_ADDED {path}: {added}")
    return out
