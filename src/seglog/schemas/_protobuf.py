"""Protobuf schemas: parsing (.proto text with proto-schema-parser, or the base64 of a
serialized ``FileDescriptorProto``, the form confluent-kafka's ``ProtobufSerializer``
registers) into one model, and compatibility by Confluent's Protobuf rules.

The model: the file's package and, per message (full name), its fields by number: name,
kind (``scalar``, ``map``, or a named type: message or enum, by full name), label
(``repeated``, ``required``, ``optional`` or ""), and the oneof holding it.

``reader_errors(reader, writer)`` (Confluent's ``Difference.Type`` names its incompatible
changes; the others are compatible):

- ``PACKAGE_CHANGED``; ``MESSAGE_REMOVED`` (a writer message the reader lacks);
- ``FIELD_KIND_CHANGED`` (scalar, map and named type differ);
  ``FIELD_SCALAR_KIND_CHANGED`` outside the wire-compatible groups of the protobuf
  language guide (int32 uint32 int64 uint64 bool; sint32 sint64; fixed32 sfixed32;
  fixed64 sfixed64; string bytes); ``FIELD_NAMED_TYPE_CHANGED``;
- ``REQUIRED_FIELD_ADDED`` / ``REQUIRED_FIELD_REMOVED`` (proto2);
- ``FIELD_MOVED_TO_EXISTING_ONEOF``, ``MULTIPLE_FIELDS_MOVED_TO_ONEOF``,
  ``ONEOF_FIELD_REMOVED`` (a field leaving a oneof that stays).

Fields added or removed, renamed fields, and enum constants are compatible (readers skip
unknown field numbers; names are not on the wire).
"""

from __future__ import annotations

import base64
import binascii
from dataclasses import dataclass, field
from typing import Any

from antlr4.error.ErrorListener import ErrorListener
from google.protobuf import descriptor_pb2
from google.protobuf.message import DecodeError
from proto_schema_parser import ast
from proto_schema_parser.parser import Parser

__all__ = [
    "DESCRIPTOR_SCALARS",
    "ProtoField",
    "ProtoModel",
    "parse_protobuf",
    "qualify",
    "raising_parser",
    "reader_errors",
    "resolved",
]

_SCALARS = frozenset({
    "double", "float", "int32", "int64", "uint32", "uint64", "sint32", "sint64",
    "fixed32", "fixed64", "sfixed32", "sfixed64", "bool", "string", "bytes",
})  # fmt: skip
_GROUPS = (
    frozenset({"int32", "uint32", "int64", "uint64", "bool"}),
    frozenset({"sint32", "sint64"}),
    frozenset({"fixed32", "sfixed32"}),
    frozenset({"fixed64", "sfixed64"}),
    frozenset({"string", "bytes"}),
)
# FieldDescriptorProto.Type numbers → .proto scalar names (11 message, 14 enum, 10 group)
DESCRIPTOR_SCALARS = {
    1: "double", 2: "float", 3: "int64", 4: "uint64", 5: "int32", 6: "fixed64",
    7: "fixed32", 8: "bool", 9: "string", 12: "bytes", 13: "uint32", 15: "sfixed32",
    16: "sfixed64", 17: "sint32", 18: "sint64",
}  # fmt: skip
_LABELS = {1: "optional", 2: "required", 3: "repeated"}


@dataclass
class ProtoField:
    """One field: name, kind (``scalar``, ``map``, ``named``), its type (a scalar name,
    ``map<k,v>``, or a message/enum full name), label, and its oneof ("" if none)."""

    name: str
    kind: str
    type: str
    label: str = ""
    oneof: str = ""


@dataclass
class ProtoModel:
    """A parsed .proto file: package, syntax, messages (full name → fields by number)."""

    package: str = ""
    syntax: str = "proto2"
    messages: dict[str, dict[int, ProtoField]] = field(default_factory=dict)
    named: set[str] = field(default_factory=set)
    """Full names of the file's messages and enums."""


def parse_protobuf(text: str) -> ProtoModel:
    """A .proto text, or the base64 of a serialized FileDescriptorProto, as a
    :class:`ProtoModel`. Raises ValueError naming the problem."""
    stripped = text.strip()
    if stripped and not any(ch in stripped for ch in " \n;{"):
        try:
            fdp = descriptor_pb2.FileDescriptorProto()
            fdp.ParseFromString(base64.b64decode(stripped, validate=True))
        except (binascii.Error, DecodeError, ValueError) as exc:
            raise ValueError(
                f"Invalid Protobuf schema: not .proto text nor a descriptor: {exc}"
            ) from None
        return _from_descriptor(fdp)
    try:
        parsed = Parser(setup_lexer=raising_parser, setup_parser=raising_parser).parse(text)
    except Exception as exc:  # the ANTLR-based parser raises its own errors
        raise ValueError(f"Invalid Protobuf schema: {exc}") from None
    return _from_ast(parsed)


class _Raise(ErrorListener):  # type: ignore[misc]
    """ANTLR's default listener prints syntax errors and carries on: raise instead."""

    def syntaxError(  # noqa: N802, PLR0917 (ANTLR's signature)
        self, recognizer: Any, offending: Any, line: int, column: int, msg: str, e: Any
    ) -> None:
        raise ValueError(f"line {line}:{column} {msg}")


def raising_parser(recognizer: Any) -> None:
    """proto-schema-parser's lexer/parser set-up hook: syntax errors raise ValueError."""
    recognizer.removeErrorListeners()
    recognizer.addErrorListener(_Raise())


def qualify(package: str, name: str) -> str:
    """``package.name`` (``name`` alone at the root)."""
    return f"{package}.{name}" if package else name


def _from_ast(parsed: ast.File) -> ProtoModel:
    model = ProtoModel(syntax=parsed.syntax or "proto2")
    for element in parsed.file_elements:
        if isinstance(element, ast.Package):
            model.package = element.name
    raw: dict[str, list[tuple[int, ProtoField]]] = {}

    def walk(elements: list[Any], scope: str) -> None:
        for element in elements:
            if isinstance(element, ast.Message):
                name = qualify(scope, element.name)
                model.named.add(name)
                raw[name] = []
                _fields(element.elements, name, "")
                walk(element.elements, name)
            elif isinstance(element, ast.Enum):
                model.named.add(qualify(scope, element.name))

    def _fields(elements: list[Any], message: str, oneof: str) -> None:
        for element in elements:
            if isinstance(element, ast.Field):
                label = element.cardinality.value.lower() if element.cardinality else ""
                kind = "scalar" if element.type in _SCALARS else "named"
                raw[message].append(
                    (element.number, ProtoField(element.name, kind, element.type, label, oneof))
                )
            elif isinstance(element, ast.MapField):
                type_ = f"map<{element.key_type},{element.value_type}>"
                raw[message].append((element.number, ProtoField(element.name, "map", type_)))
            elif isinstance(element, ast.OneOf):
                _fields(element.elements, message, element.name)

    walk(parsed.file_elements, model.package)
    for message, fields in raw.items():
        model.messages[message] = {n: resolved(f, message, model.named) for n, f in fields}
    return model


def resolved(f: ProtoField, scope: str, named: set[str]) -> ProtoField:
    """A named field type as a full name, by protobuf's scoping (innermost scope first)."""
    if f.kind != "named":
        return f
    if f.type.startswith("."):
        f.type = f.type[1:]
        return f
    parts = scope.split(".")
    for i in range(len(parts), -1, -1):
        candidate = ".".join([*parts[:i], f.type])
        if candidate in named:
            f.type = candidate
            return f
    return f  # an imported type: compared by the name as written


def _from_descriptor(fdp: descriptor_pb2.FileDescriptorProto) -> ProtoModel:
    model = ProtoModel(package=fdp.package, syntax=fdp.syntax or "proto2")
    maps: dict[str, str] = {}

    def names(msgs: Any, enums: Any, scope: str) -> None:
        for e in enums:
            model.named.add(qualify(scope, e.name))
        for m in msgs:
            full = qualify(scope, m.name)
            model.named.add(full)
            if m.options.map_entry:
                k, v = m.field[0], m.field[1]
                maps[full] = f"map<{_type_text(k)},{_type_text(v)}>"
            names(m.nested_type, m.enum_type, full)

    def walk(msgs: Any, scope: str) -> None:
        for m in msgs:
            full = qualify(scope, m.name)
            if m.options.map_entry:
                continue
            fields: dict[int, ProtoField] = {}
            for f in m.field:
                oneof = ""
                if f.HasField("oneof_index") and not f.proto3_optional:
                    oneof = m.oneof_decl[f.oneof_index].name
                label = _LABELS.get(f.label, "")
                if label == "optional" and not f.proto3_optional and fdp.syntax == "proto3":
                    label = ""
                type_name = f.type_name.lstrip(".")
                if type_name in maps:
                    fields[f.number] = ProtoField(f.name, "map", maps[type_name])
                elif f.type in DESCRIPTOR_SCALARS:
                    fields[f.number] = ProtoField(
                        f.name, "scalar", DESCRIPTOR_SCALARS[f.type], label, oneof
                    )
                else:
                    fields[f.number] = ProtoField(f.name, "named", type_name, label, oneof)
            model.messages[full] = fields
            walk(m.nested_type, full)

    names(fdp.message_type, fdp.enum_type, fdp.package)
    walk(fdp.message_type, fdp.package)
    return model


def _type_text(f: Any) -> str:
    return DESCRIPTOR_SCALARS.get(f.type) or f.type_name.lstrip(".").rsplit(".", 1)[-1]


def _same_group(a: str, b: str) -> bool:
    return a == b or any(a in g and b in g for g in _GROUPS)


def reader_errors(reader: ProtoModel, writer: ProtoModel) -> list[str]:
    """Why data written with ``writer`` may not be read with ``reader`` (Confluent's
    incompatible Protobuf differences; empty: none)."""
    out: list[str] = []
    if reader.package != writer.package:
        out.append(f"PACKAGE_CHANGED {writer.package!r} -> {reader.package!r}")
    for name, w_fields in writer.messages.items():
        r_fields = reader.messages.get(name)
        if r_fields is None:
            out.append(f"MESSAGE_REMOVED {name}")
            continue
        out += _message(name, r_fields, w_fields)
    return out


def _message(name: str, r: dict[int, ProtoField], w: dict[int, ProtoField]) -> list[str]:
    out: list[str] = []
    moved: dict[str, int] = {}
    w_oneofs = {f.oneof for f in w.values() if f.oneof}
    for number, rf in r.items():
        wf = w.get(number)
        where = f"{name}.{rf.name} (#{number})"
        if wf is None:
            if rf.label == "required":
                out.append(f"REQUIRED_FIELD_ADDED {where}")
            continue
        if rf.kind != wf.kind:
            out.append(f"FIELD_KIND_CHANGED {where}: {wf.kind} -> {rf.kind}")
        elif rf.kind == "scalar" and not _same_group(rf.type, wf.type):
            out.append(f"FIELD_SCALAR_KIND_CHANGED {where}: {wf.type} -> {rf.type}")
        elif rf.kind != "scalar" and rf.type != wf.type:
            out.append(f"FIELD_NAMED_TYPE_CHANGED {where}: {wf.type} -> {rf.type}")
        if (rf.label == "required") != (wf.label == "required"):
            kind = "ADDED" if rf.label == "required" else "REMOVED"
            out.append(f"REQUIRED_FIELD_{kind} {where}")
        if rf.oneof and not wf.oneof:
            if rf.oneof in w_oneofs:
                out.append(f"FIELD_MOVED_TO_EXISTING_ONEOF {where}")
            moved[rf.oneof] = moved.get(rf.oneof, 0) + 1
        elif wf.oneof and rf.oneof != wf.oneof and wf.oneof in {f.oneof for f in r.values()}:
            out.append(f"ONEOF_FIELD_REMOVED {where}")
    out += [f"MULTIPLE_FIELDS_MOVED_TO_ONEOF {name}.{o}" for o, n in moved.items() if n > 1]
    return out
