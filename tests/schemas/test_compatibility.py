"""The compatibility matrix: schema pairs (old, new) of each format with the answer each
level must give, derived from the formats' rules (Avro's schema resolution, Confluent's
JSON Schema and Protobuf differences); NONE accepts every pair; the _TRANSITIVE forms
check every older version."""

from __future__ import annotations

import json
from typing import Any

import pytest

from seglog.schemas import AVRO, JSON, PROTOBUF, RegistryError, check_level, parse


def _avro(*fields: dict[str, Any], name: str = "R", **extra: Any) -> str:
    return json.dumps({"type": "record", "name": name, "fields": list(fields), **extra})


def _f(name: str, type_: Any, **extra: Any) -> dict[str, Any]:
    return {"name": name, "type": type_, **extra}


def _enum(*symbols: str, **extra: Any) -> dict[str, Any]:
    return {"type": "enum", "name": "E", "symbols": list(symbols), **extra}


def _obj(props: dict[str, Any], **extra: Any) -> str:
    return json.dumps({"type": "object", "properties": props, **extra})


def _proto(body: str, package: str = "p") -> str:
    return f'syntax = "proto3";\npackage {package};\n{body}\n'


# (format, old, new, BACKWARD, FORWARD, FULL): True = compatible
MATRIX: list[tuple[str, str, str, str, bool, bool, bool]] = [
    # -- Avro: the specification's schema resolution ---------------------------------------
    ("avro: field added with default", AVRO,
     _avro(_f("a", "int")), _avro(_f("a", "int"), _f("b", "string", default="")),
     True, True, True),
    ("avro: field added without default", AVRO,
     _avro(_f("a", "int")), _avro(_f("a", "int"), _f("b", "string")), False, True, False),
    ("avro: field without default removed", AVRO,
     _avro(_f("a", "int"), _f("b", "string")), _avro(_f("a", "int")), True, False, False),
    ("avro: field with default removed", AVRO,
     _avro(_f("a", "int"), _f("b", "string", default="")), _avro(_f("a", "int")),
     True, True, True),
    ("avro: int promoted to long", AVRO,
     _avro(_f("a", "int")), _avro(_f("a", "long")), True, False, False),
    ("avro: long narrowed to int", AVRO,
     _avro(_f("a", "long")), _avro(_f("a", "int")), False, True, False),
    ("avro: float promoted to double", AVRO,
     _avro(_f("a", "float")), _avro(_f("a", "double")), True, False, False),
    ("avro: string and bytes", AVRO,
     _avro(_f("a", "string")), _avro(_f("a", "bytes")), True, True, True),
    ("avro: int to string", AVRO,
     _avro(_f("a", "int")), _avro(_f("a", "string")), False, False, False),
    ("avro: enum symbol added", AVRO,
     _avro(_f("e", _enum("A", "B"))), _avro(_f("e", _enum("A", "B", "C"))), True, False, False),
    ("avro: enum symbol added, old reader has a default", AVRO,
     _avro(_f("e", _enum("A", "B", default="A"))),
     _avro(_f("e", _enum("A", "B", "C", default="A"))), True, True, True),
    ("avro: record renamed with an alias", AVRO,
     _avro(_f("a", "int"), name="Old"), _avro(_f("a", "int"), name="New", aliases=["Old"]),
     True, False, False),
    ("avro: record renamed without an alias", AVRO,
     _avro(_f("a", "int"), name="Old"), _avro(_f("a", "int"), name="New"), False, False, False),
    ("avro: field renamed with an alias", AVRO,
     _avro(_f("a", "int")), _avro(_f("b", "int", aliases=["a"])), True, False, False),
    ("avro: type widened to a union", AVRO,
     _avro(_f("a", "int")), _avro(_f("a", ["null", "int"])), True, False, False),
    ("avro: union branch added", AVRO,
     _avro(_f("a", ["null", "int"])), _avro(_f("a", ["null", "int", "string"])),
     True, False, False),
    ("avro: fixed size changed", AVRO,
     _avro(_f("a", {"type": "fixed", "name": "F", "size": 4})),
     _avro(_f("a", {"type": "fixed", "name": "F", "size": 8})), False, False, False),
    ("avro: array items promoted", AVRO,
     _avro(_f("a", {"type": "array", "items": "int"})),
     _avro(_f("a", {"type": "array", "items": "long"})), True, False, False),
    ("avro: map values string to bytes", AVRO,
     _avro(_f("a", {"type": "map", "values": "string"})),
     _avro(_f("a", {"type": "map", "values": "bytes"})), True, True, True),
    ("avro: recursive type unchanged", AVRO,
     _avro(_f("next", ["null", "R"])), _avro(_f("next", ["null", "R"]), _f("v", "int", default=0)),
     True, True, True),
    # -- JSON Schema: Confluent's content-model rules --------------------------------------
    ("json: property added to an open content model", JSON,
     _obj({"a": {"type": "integer"}}), _obj({"a": {"type": "integer"}, "b": {"type": "string"}}),
     False, True, False),
    ("json: property added to a closed content model", JSON,
     _obj({"a": {"type": "integer"}}, additionalProperties=False),
     _obj({"a": {"type": "integer"}, "b": {"type": "string"}}, additionalProperties=False),
     True, False, False),
    ("json: property removed from an open content model", JSON,
     _obj({"a": {"type": "integer"}, "b": {"type": "string"}}), _obj({"a": {"type": "integer"}}),
     True, False, False),
    ("json: type widened integer to number", JSON,
     _obj({"a": {"type": "integer"}}), _obj({"a": {"type": "number"}}), True, False, False),
    ("json: required property added", JSON,
     _obj({"a": {"type": "integer"}}), _obj({"a": {"type": "integer"}}, required=["a"]),
     False, True, False),
    ("json: enum narrowed", JSON,
     _obj({"a": {"enum": ["x", "y"]}}), _obj({"a": {"enum": ["x"]}}), False, True, False),
    ("json: maxLength decreased", JSON,
     _obj({"a": {"type": "string", "maxLength": 10}}),
     _obj({"a": {"type": "string", "maxLength": 5}}), False, True, False),
    ("json: description changed only", JSON,
     _obj({"a": {"type": "string"}}), _obj({"a": {"type": "string", "description": "d"}}),
     True, True, True),
    # -- Protobuf: Confluent's differences -------------------------------------------------
    ("proto: field added", PROTOBUF,
     _proto("message M { int32 a = 1; }"), _proto("message M { int32 a = 1; string b = 2; }"),
     True, True, True),
    ("proto: field removed", PROTOBUF,
     _proto("message M { int32 a = 1; string b = 2; }"), _proto("message M { int32 a = 1; }"),
     True, True, True),
    ("proto: field renamed", PROTOBUF,
     _proto("message M { int32 a = 1; }"), _proto("message M { int32 renamed = 1; }"),
     True, True, True),
    ("proto: int32 to int64 (wire-compatible)", PROTOBUF,
     _proto("message M { int32 a = 1; }"), _proto("message M { int64 a = 1; }"), True, True, True),
    ("proto: int32 to string", PROTOBUF,
     _proto("message M { int32 a = 1; }"), _proto("message M { string a = 1; }"),
     False, False, False),
    ("proto: scalar to message", PROTOBUF,
     _proto("message M { int32 a = 1; } message N { int32 x = 1; }"),
     _proto("message M { N a = 1; } message N { int32 x = 1; }"), False, False, False),
    ("proto: message removed", PROTOBUF,
     _proto("message M { int32 a = 1; } message N { int32 x = 1; }"),
     _proto("message M { int32 a = 1; }"), False, True, False),
    ("proto: package changed", PROTOBUF,
     _proto("message M { int32 a = 1; }"), _proto("message M { int32 a = 1; }", "q"),
     False, False, False),
    ("proto: field moved into an existing oneof", PROTOBUF,
     _proto("message M { int32 a = 1; oneof o { string s = 2; } }"),
     _proto("message M { oneof o { string s = 2; int32 a = 1; } }"), False, False, False),
]  # fmt: skip


@pytest.mark.parametrize(
    ("case", "schema_type", "old", "new", "backward", "forward", "full"),
    MATRIX,
    ids=[row[0] for row in MATRIX],
)
def test_matrix(
    case: str, schema_type: str, old: str, new: str, backward: bool, forward: bool, full: bool
) -> None:
    """Each level's answer for the pair, and NONE accepts it."""
    del case
    before, after = parse(schema_type, old, []), parse(schema_type, new, [])
    for level, expected in (("BACKWARD", backward), ("FORWARD", forward), ("FULL", full)):
        errors = check_level(level, after, [before])
        assert (errors == []) is expected, (level, errors)
        transitive = check_level(f"{level}_TRANSITIVE", after, [before])
        assert (transitive == []) is expected, (f"{level}_TRANSITIVE", transitive)
    assert check_level("NONE", after, [before]) == []


def test_transitive_levels_check_every_older_version() -> None:
    """v1 a:int, v2 without a, v3 a:string with a default: each step is BACKWARD, but v3
    cannot read v1's data (BACKWARD_TRANSITIVE refuses)."""
    v1 = parse(AVRO, _avro(_f("a", "int"), _f("k", "int")), [])
    v2 = parse(AVRO, _avro(_f("k", "int")), [])
    v3 = parse(AVRO, _avro(_f("a", "string", default=""), _f("k", "int")), [])
    assert check_level("BACKWARD", v3, [v1, v2]) == []
    errors = check_level("BACKWARD_TRANSITIVE", v3, [v1, v2])
    assert len(errors) == 1
    assert "string cannot read writer type int" in errors[0]


def test_json_keyword_without_a_rule_is_refused_not_guessed() -> None:
    """A reader keyword whose rule is not implemented (oneOf changed) is 42203 at every
    level but NONE, rather than an answer that may be wrong."""
    old = parse(JSON, _obj({"a": {"oneOf": [{"type": "string"}, {"type": "integer"}]}}), [])
    new = parse(JSON, _obj({"a": {"oneOf": [{"type": "string"}]}}), [])
    for level in ("BACKWARD", "FORWARD_TRANSITIVE", "FULL"):
        with pytest.raises(RegistryError) as info:
            check_level(level, new, [old])
        assert info.value.error_code == 42203
        assert "oneOf" in info.value.message
    assert check_level("NONE", new, [old]) == []
    same = parse(JSON, _obj({"a": {"oneOf": [{"type": "string"}]}}, title="t"), [])
    assert check_level("FULL", same, [new]) == []  # unchanged keywords need no rule


@pytest.mark.parametrize(
    ("schema_type", "text"),
    [
        (AVRO, "{not json"),
        (AVRO, '{"type": "record", "name": "R", "fields": [{"name": "a", "type": "nope"}]}'),
        (JSON, '{"type": 12}'),
        (JSON, "[1, 2]"),
        (PROTOBUF, "message M { int32 a = ; }"),
        (PROTOBUF, "bm90IGEgZGVzY3JpcHRvcg"),
        ("XML", "<a/>"),
    ],
)
def test_malformed_schemas_are_42201(schema_type: str, text: str) -> None:
    with pytest.raises(RegistryError) as info:
        parse(schema_type, text, [])
    assert info.value.error_code == 42201
    assert info.value.status == 422
