"""A JSON document checked against its JSON Schema, fast for the schemas that only say
which types go where: Iceberg's ``value_schema`` mode validates every JSON value before it
becomes a row, as Confluent's ``JSONDeserializer`` does, and the Spark sink every value
it writes, as Confluent's ``JSONSerializer`` does.

:func:`json_checker` compiles a schema that uses only ``type``, ``properties``,
``required``, ``items`` (one schema), ``additionalProperties`` and annotations (``title``,
``description``, ``default``, ``format`` — which jsonschema does not assert either — ...)
into nested closures: the same verdict as jsonschema's draft 7 validator (``integer``:
an int, or a float without a fraction; ``number``: int or float; a bool is neither) in
about a tenth of the time. Any other keyword, or a ``$schema`` other than drafts 6, 7,
2019-09 and 2020-12 (draft 4 reads ``1.0`` as no integer), is validated by jsonschema.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from jsonschema import Draft7Validator
from jsonschema.exceptions import best_match
from jsonschema.validators import validator_for

__all__ = ["json_checker"]

Check = Callable[[Any, str], str | None]
"""(instance, its path) → why it is not valid (with the path), None when valid."""

_ANNOTATIONS = frozenset({
    "title", "description", "default", "examples", "$schema", "$id", "id", "$comment",
    "readOnly", "writeOnly", "deprecated", "format",
})  # fmt: skip
_FAST = frozenset({"type", "properties", "required", "items", "additionalProperties"})
_DRAFTS = ("draft-06", "draft-07", "2019-09", "2020-12")


def _is_integer(value: Any) -> bool:
    if isinstance(value, bool):
        return False
    return isinstance(value, int) or (isinstance(value, float) and value.is_integer())


_TYPES: dict[str, Callable[[Any], bool]] = {
    "string": lambda v: isinstance(v, str),
    "integer": _is_integer,
    "number": lambda v: isinstance(v, (int, float)) and not isinstance(v, bool),
    "boolean": lambda v: isinstance(v, bool),
    "null": lambda v: v is None,
    "object": lambda v: isinstance(v, dict),
    "array": lambda v: isinstance(v, list),
}


class _Slow(Exception):  # noqa: N818 (a fallback, not a failure)
    """The schema uses a keyword the fast checker does not implement."""


def _where(path: str) -> str:
    return path or "the root"


def _compile(schema: Any) -> Check:
    """The check of one schema node. Raises _Slow."""
    if schema is True or schema == {}:
        return lambda _v, _p: None
    if schema is False:
        return lambda _v, p: f"at {_where(p)}: nothing is allowed here"
    if not isinstance(schema, dict) or not set(schema) <= _FAST | _ANNOTATIONS:
        raise _Slow
    kinds = schema.get("type")
    names = [kinds] if isinstance(kinds, str) else kinds
    if names is not None and (
        not isinstance(names, list) or not all(isinstance(n, str) and n in _TYPES for n in names)
    ):
        raise _Slow
    tests = [_TYPES[n] for n in names] if names is not None else None
    expected = ", ".join(map(repr, names or []))
    props = schema.get("properties", {})
    required = schema.get("required", [])
    if not isinstance(props, dict) or not isinstance(required, list):
        raise _Slow
    checks = {name: _compile(sub) for name, sub in props.items()}
    extra_schema = schema.get("additionalProperties", True)
    extra = _compile(extra_schema)
    items_schema = schema.get("items", True)
    if isinstance(items_schema, list):
        raise _Slow
    items = _compile(items_schema)

    def check(value: Any, path: str) -> str | None:
        if tests is not None and not any(t(value) for t in tests):
            return f"at {_where(path)}: {value!r} is not of type {expected}"
        if isinstance(value, dict):
            for name in required:
                if name not in value:
                    return f"at {_where(path)}: {name!r} is a required property"
            for name, sub in value.items():
                inner = f"{path}/{name}" if path else str(name)
                found = checks.get(name)
                why = found(sub, inner) if found is not None else extra(sub, inner)
                if why is not None:
                    return why
        elif isinstance(value, list):
            for i, sub in enumerate(value):
                why = items(sub, f"{path}/{i}" if path else str(i))
                if why is not None:
                    return why
        return None

    return check


def json_checker(schema: Any) -> Callable[[Any], str | None]:
    """document → why it is not valid under ``schema`` (a parsed JSON Schema; the path to
    the offending value first, ``a/b/0``), None when valid. Fast for the schemas of the
    module docstring, jsonschema for the others."""
    draft = str(schema.get("$schema", "")) if isinstance(schema, dict) else ""
    if not draft or any(d in draft for d in _DRAFTS):
        try:
            fast = _compile(schema)
        except _Slow:
            pass
        else:
            return lambda doc: fast(doc, "")
    validator = validator_for(schema, default=Draft7Validator)(schema)

    def slow(doc: Any) -> str | None:
        error = best_match(validator.iter_errors(doc))
        if error is None:
            return None
        return f"at {_where('/'.join(map(str, error.absolute_path)))}: {error.message}"

    return slow
