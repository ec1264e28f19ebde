"""Confluent's ``format=serialized`` of a Protobuf schema: the base64 of its serialized
``FileDescriptorProto`` (what confluent-kafka's ProtobufDeserializer asks for), compiled
from .proto text by walking proto-schema-parser's syntax tree as protoc would lay it out
(nested types, enums, fields, oneofs, ``map<k, v>`` as a nested ``...Entry`` message,
proto3 ``optional`` as a synthetic oneof, imports as dependencies)."""

from __future__ import annotations

import base64
from typing import Any

from google.protobuf import descriptor_pb2
from proto_schema_parser import ast
from proto_schema_parser.parser import Parser

from seglog.schemas._protobuf import (
    DESCRIPTOR_SCALARS,
    ProtoField,
    ProtoModel,
    parse_protobuf,
    qualify,
    raising_parser,
    resolved,
)

__all__ = ["serialized_protobuf"]

_TYPE_NUMBERS = {name: number for number, name in DESCRIPTOR_SCALARS.items()}
_MESSAGE, _ENUM = 11, 14
_REPEATED, _OPTIONAL, _REQUIRED = 3, 1, 2


def serialized_protobuf(text: str) -> str:
    """The base64 of the serialized ``FileDescriptorProto`` of a schema (what
    confluent-kafka's ProtobufDeserializer asks for with ``format=serialized``): a
    descriptor stays as it is; .proto text is compiled from its syntax tree (messages,
    nested types, enums, fields, oneofs, maps, imports; options other than proto3
    ``optional`` are not carried). Raises ValueError."""
    stripped = text.strip()
    model = parse_protobuf(stripped)
    if not any(ch in stripped for ch in " \n;{"):
        return stripped
    parsed = Parser(setup_lexer=raising_parser, setup_parser=raising_parser).parse(stripped)
    fdp = descriptor_pb2.FileDescriptorProto(name="schema.proto", package=model.package)
    if parsed.syntax:
        fdp.syntax = parsed.syntax
    for element in parsed.file_elements:
        if isinstance(element, ast.Import):
            fdp.dependency.append(element.name)
        elif isinstance(element, ast.Message):
            _message_proto(fdp.message_type.add(), element, model.package, model)
        elif isinstance(element, ast.Enum):
            _enum_proto(fdp.enum_type.add(), element)
    return base64.b64encode(fdp.SerializeToString()).decode("ascii")


def _enum_proto(out: Any, enum: ast.Enum) -> None:
    out.name = enum.name
    for value in enum.elements:
        if isinstance(value, ast.EnumValue):
            out.value.add(name=value.name, number=value.number)


def _field_type(out: Any, type_: str, scope: str, model: ProtoModel) -> None:
    if type_ in _TYPE_NUMBERS:
        out.type = _TYPE_NUMBERS[type_]
        return
    full = resolved(ProtoField("", "named", type_), scope, model.named).type
    out.type = _MESSAGE if full in model.messages or full not in model.named else _ENUM
    out.type_name = "." + full


def _message_proto(out: Any, message: ast.Message, scope: str, model: ProtoModel) -> None:
    out.name = message.name
    full = qualify(scope, message.name)
    for element in message.elements:
        if isinstance(element, ast.Message):
            _message_proto(out.nested_type.add(), element, full, model)
        elif isinstance(element, ast.Enum):
            _enum_proto(out.enum_type.add(), element)
        elif isinstance(element, ast.Field):
            _field_proto(out, element, full, model, None)
        elif isinstance(element, ast.OneOf):
            index = len(out.oneof_decl)
            out.oneof_decl.add(name=element.name)
            for inner in element.elements:
                if isinstance(inner, ast.Field):
                    _field_proto(out, inner, full, model, index)
        elif isinstance(element, ast.MapField):
            entry = out.nested_type.add(name=_camel(element.name) + "Entry")
            entry.options.map_entry = True
            key = entry.field.add(name="key", number=1, label=_OPTIONAL)
            _field_type(key, element.key_type, full, model)
            value = entry.field.add(name="value", number=2, label=_OPTIONAL)
            _field_type(value, element.value_type, full, model)
            field = out.field.add(name=element.name, number=element.number, label=_REPEATED)
            field.type = _MESSAGE
            field.type_name = f".{full}.{entry.name}"
    _synthetic_oneofs_last(out)


def _synthetic_oneofs_last(out: Any) -> None:
    """proto3 ``optional`` fields' synthetic oneofs after every real oneof, as protoc lays
    them out (the protobuf runtime refuses a descriptor otherwise)."""
    synthetic = {f.oneof_index for f in out.field if f.proto3_optional}
    if not synthetic:
        return
    names = [d.name for d in out.oneof_decl]
    order = [i for i in range(len(names)) if i not in synthetic] + sorted(synthetic)
    where = {old: new for new, old in enumerate(order)}
    del out.oneof_decl[:]
    for old in order:
        out.oneof_decl.add(name=names[old])
    for f in out.field:
        if f.HasField("oneof_index"):
            f.oneof_index = where[f.oneof_index]


def _field_proto(
    out: Any, element: ast.Field, scope: str, model: ProtoModel, oneof: int | None
) -> None:
    cardinality = element.cardinality.value.lower() if element.cardinality else ""
    label = {"repeated": _REPEATED, "required": _REQUIRED}.get(cardinality, _OPTIONAL)
    field = out.field.add(name=element.name, number=element.number, label=label)
    _field_type(field, element.type, scope, model)
    if oneof is not None:
        field.oneof_index = oneof
    elif cardinality == "optional" and model.syntax == "proto3":
        field.proto3_optional = True  # its synthetic oneof, as protoc makes it
        field.oneof_index = len(out.oneof_decl)
        out.oneof_decl.add(name=f"_{element.name}")


def _camel(name: str) -> str:
    return "".join(part[:1].upper() + part[1:] for part in name.split("_"))
