"""The JSON checker of ``value_schema`` mode gives jsonschema's verdict (draft 7) on
every document, through its fast path for type-only schemas and through jsonschema for the
rest; its reason names the path of the offending value."""

from __future__ import annotations

import itertools
from typing import Any

import pytest
from jsonschema import Draft7Validator

from seglog.schemas._jsoncheck import _compile, _Slow, json_checker

PEOPLE = {
    "type": "object",
    "title": "people",
    "required": ["name"],
    "properties": {
        "name": {"type": "string", "description": "who"},
        "age": {"type": ["integer", "null"]},
        "score": {"type": "number"},
        "admin": {"type": "boolean"},
        "address": {"type": "object", "properties": {"city": {"type": "string"}},
                    "additionalProperties": False},
        "tags": {"type": "array", "items": {"type": "string"}},
        "any": {},
        "when": {"type": "string", "format": "date-time"},
    },
}  # fmt: skip
CLOSED = {"type": "object", "properties": {"a": {"type": "integer"}},
          "additionalProperties": {"type": "boolean"}}  # fmt: skip
BOUNDED = {"type": "object", "properties": {"n": {"type": "integer", "minimum": 0}}}
VALUES: list[Any] = [None, True, False, 0, 1, -7, 1.0, 1.5, 1e300, "", "x", [], ["a"], [1],
                     {}, {"city": "c"}, {"city": 1}, {"zip": "1"}]  # fmt: skip


def _docs() -> list[Any]:
    docs: list[Any] = [[], "text", 3, None, {}]
    for key, value in itertools.product(
        ["name", "age", "score", "admin", "address", "tags", "any", "when", "a", "b", "n"],
        VALUES,
    ):
        docs.append({key: value})
        docs.append({"name": "n", key: value})
    return docs


@pytest.mark.parametrize("schema", [PEOPLE, CLOSED, BOUNDED, True, False, {"type": "integer"}])
def test_same_verdict_as_jsonschema(schema: Any) -> None:
    check = json_checker(schema)
    reference = Draft7Validator(schema)
    for doc in _docs():
        assert (check(doc) is None) == reference.is_valid(doc), doc


def test_fast_path_for_type_only_schemas() -> None:
    for schema in (PEOPLE, CLOSED, True, {"type": "integer"}):
        _compile(schema)  # no _Slow
    for schema in (BOUNDED, {"oneOf": [{"type": "string"}]}, {"$ref": "#/definitions/x"},
                   {"items": [{"type": "string"}]}):  # fmt: skip
        with pytest.raises(_Slow):
            _compile(schema)


def test_reasons_name_the_path() -> None:
    check = json_checker(PEOPLE)
    assert check({"name": "a", "address": {"city": 7}}) == (
        "at address/city: 7 is not of type 'string'"
    )
    assert check({"name": "a", "tags": ["x", 2]}) == "at tags/1: 2 is not of type 'string'"
    assert check({"age": 3}) == "at the root: 'name' is a required property"
    assert json_checker(BOUNDED)({"n": -1}) == "at n: -1 is less than the minimum of 0"
