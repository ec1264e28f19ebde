"""The HTTP resources of Confluent Schema Registry's REST API v1 over a
:class:`seglog.schemas.Registry`, as a starlette application.

Every answer is JSON in ``application/vnd.schemaregistry.v1+json``; every refusal is
Confluent's body ``{"error_code": ..., "message": ...}`` with its HTTP status (40401
subject not found, 40402 version not found, 40403 schema not found, 409 incompatible,
42201 invalid schema, 42202 invalid version, 42203 invalid compatibility level, 50001
store error; unknown paths 404, bodies over :data:`MAX_BODY_BYTES` 413, a body that is
not a JSON object 400, credentials missing or wrong 401 / error 40101, an operation the
ACLs deny 403 / error 40301). A write is answered once its ``_schemas`` records are
durable (fsynced).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Awaitable, Callable
from typing import Any

from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, Response
from starlette.routing import Route

from seglog.broker.schema_registry.access import Access
from seglog.broker.security.authorizer import Op
from seglog.schemas import (
    PROTOBUF,
    SCHEMA_TYPES,
    Registry,
    RegistryError,
    SchemaVersion,
    serialized_protobuf,
    version_json,
)

__all__ = ["CONTENT_TYPE", "MAX_BODY_BYTES", "registry_app"]

log = logging.getLogger("seglog.broker.schema_registry")

CONTENT_TYPE = "application/vnd.schemaregistry.v1+json"
MAX_BODY_BYTES = 8 * 1024 * 1024
"""Largest request body accepted (a schema and its JSON envelope), in bytes."""

Handler = Callable[[Request], Awaitable[Response]]


class _Refused(Exception):  # noqa: N818 (an HTTP refusal, not a failure)
    def __init__(self, status: int, code: int, message: str) -> None:
        super().__init__(message)
        self.status, self.code, self.message = status, code, message


def _json(doc: Any, status: int = 200) -> Response:
    return JSONResponse(doc, status_code=status, media_type=CONTENT_TYPE)


def _error(status: int, code: int, message: str) -> Response:
    headers = {"WWW-Authenticate": 'Basic realm="seglog"'} if status == 401 else None
    return JSONResponse(
        {"error_code": code, "message": message}, status, headers, media_type=CONTENT_TYPE
    )


def _formatted(request: Request, v: SchemaVersion) -> SchemaVersion:
    """``v`` in the ``format`` asked: Protobuf ``serialized`` is the base64 of its
    FileDescriptorProto (what confluent-kafka's ProtobufDeserializer asks for)."""
    if v.schema_type != PROTOBUF or request.query_params.get("format") != "serialized":
        return v
    try:
        text = serialized_protobuf(v.schema)
    except ValueError as exc:
        raise RegistryError(42201, f"Invalid schema: {exc}") from None
    return SchemaVersion(v.subject, v.version, v.id, text, v.schema_type, v.references, v.deleted)


def _flag(request: Request, name: str) -> bool:
    return request.query_params.get(name, "false").lower() == "true"


async def _body(request: Request) -> dict[str, Any]:
    """The request's JSON object, read up to MAX_BODY_BYTES."""
    declared = request.headers.get("content-length")
    if declared is not None and declared.isdigit() and int(declared) > MAX_BODY_BYTES:
        raise _Refused(413, 413, f"Request body larger than {MAX_BODY_BYTES} bytes")
    data = bytearray()
    async for chunk in request.stream():
        data += chunk
        if len(data) > MAX_BODY_BYTES:
            raise _Refused(413, 413, f"Request body larger than {MAX_BODY_BYTES} bytes")
    try:
        doc = json.loads(data)
    except (ValueError, RecursionError) as exc:  # JSONDecodeError, UnicodeDecodeError
        raise _Refused(400, 400, f"Unrecognized request body: {exc!r}") from None
    if not isinstance(doc, dict):
        raise _Refused(400, 400, "Unrecognized request body: not a JSON object")
    return doc


class _Api:
    """The resources, bound to one registry, its access rules and its durability wait."""

    def __init__(
        self,
        registry: Registry,
        access: Access,
        durable: Callable[[], Awaitable[None]],
    ) -> None:
        self.registry = registry
        self.access = access
        self.durable = durable

    # -- plumbing ------------------------------------------------------------------------

    def endpoint(self, fn: Callable[[Request, str], Awaitable[Any]]) -> Handler:
        async def run(request: Request) -> Response:
            principal = self.access.principal(request.headers.get("authorization"))
            if principal is None:
                return _error(401, 40101, "Unauthorized")
            try:
                result = await fn(request, principal)
            except RegistryError as exc:
                return _error(exc.status, exc.error_code, exc.message)
            except _Refused as exc:
                return _error(exc.status, exc.code, exc.message)
            if isinstance(result, Response):
                return result
            return _json(result)

        return run

    def require(self, request: Request, principal: str, op: int, subject: str | None) -> None:
        host = request.client.host if request.client else ""
        if not self.access.allowed(principal, host, op, subject):
            what = "the registry's global settings" if subject is None else f"subject '{subject}'"
            raise _Refused(403, 40301, f"{principal} is not authorized to use {what}")

    def may_see(self, request: Request, principal: str, subject: str) -> bool:
        host = request.client.host if request.client else ""
        return self.access.allowed(principal, host, Op.DESCRIBE, subject)

    async def written(self) -> None:
        try:
            await self.durable()
        except Exception as exc:  # the fsync failed: the log is offline
            log.error("schema registry store: %s", exc)
            raise RegistryError(50001, f"Error while storing the schema: {exc}") from exc

    # -- schemas by id -------------------------------------------------------------------

    def _by_id(self, request: Request, principal: str) -> SchemaVersion:
        schema_id = int(request.path_params["id"])
        found = self.registry.by_id(schema_id)
        holders = self.registry.id_versions(schema_id, deleted=True)
        if not any(self.may_see(request, principal, v.subject) for v in holders):
            raise _Refused(403, 40301, f"{principal} is not authorized to read schema {schema_id}")
        return found

    async def schema_by_id(self, request: Request, principal: str) -> Any:
        v = _formatted(request, self._by_id(request, principal))
        out: dict[str, Any] = {}
        if v.schema_type != "AVRO":
            out["schemaType"] = v.schema_type
        if v.references:
            out["references"] = [r.to_json() for r in v.references]
        out["schema"] = v.schema
        return out

    async def raw_schema_by_id(self, request: Request, principal: str) -> Any:
        return PlainTextResponse(self._by_id(request, principal).schema)

    async def id_subjects(self, request: Request, principal: str) -> Any:
        self._by_id(request, principal)
        found = self.registry.id_versions(
            request.path_params["id"], deleted=_flag(request, "deleted")
        )
        return sorted({v.subject for v in found if self.may_see(request, principal, v.subject)})

    async def id_versions(self, request: Request, principal: str) -> Any:
        self._by_id(request, principal)
        found = self.registry.id_versions(
            request.path_params["id"], deleted=_flag(request, "deleted")
        )
        return [{"subject": v.subject, "version": v.version} for v in found
                if self.may_see(request, principal, v.subject)]  # fmt: skip

    async def types(self, _request: Request, _principal: str) -> Any:
        return list(SCHEMA_TYPES)

    async def root(self, _request: Request, _principal: str) -> Any:
        return {}

    async def contexts(self, _request: Request, _principal: str) -> Any:
        return [":.:"]  # the default context only

    async def schemas(self, request: Request, principal: str) -> Any:
        prefix = request.query_params.get("subjectPrefix", "")
        deleted, latest_only = _flag(request, "deleted"), _flag(request, "latestOnly")
        out = []
        for subject in self.registry.subjects(deleted=deleted, prefix=prefix):
            if not self.may_see(request, principal, subject):
                continue
            versions = self.registry.state.versions(subject, deleted=deleted)
            out += [version_json(v) for v in (versions[-1:] if latest_only else versions)]
        return out

    # -- subjects ------------------------------------------------------------------------

    async def subjects(self, request: Request, principal: str) -> Any:
        prefix = request.query_params.get("subjectPrefix", "")
        found = self.registry.subjects(deleted=_flag(request, "deleted"), prefix=prefix)
        return [s for s in found if self.may_see(request, principal, s)]

    async def subject_versions(self, request: Request, principal: str) -> Any:
        subject = request.path_params["subject"]
        self.require(request, principal, Op.DESCRIBE, subject)
        return self.registry.versions(subject, deleted=_flag(request, "deleted"))

    def _version(self, request: Request, principal: str) -> SchemaVersion:
        subject = request.path_params["subject"]
        self.require(request, principal, Op.DESCRIBE, subject)
        deleted = _flag(request, "deleted")
        return self.registry.version(subject, request.path_params["version"], deleted=deleted)

    async def get_version(self, request: Request, principal: str) -> Any:
        return version_json(_formatted(request, self._version(request, principal)))

    async def get_version_schema(self, request: Request, principal: str) -> Any:
        return PlainTextResponse(self._version(request, principal).schema)

    async def referenced_by(self, request: Request, principal: str) -> Any:
        subject = request.path_params["subject"]
        self.require(request, principal, Op.DESCRIBE, subject)
        return self.registry.referenced_by(subject, request.path_params["version"])

    async def register(self, request: Request, principal: str) -> Any:
        subject = request.path_params["subject"]
        self.require(request, principal, Op.WRITE, subject)
        body = await _body(request)
        result = self.registry.register(subject, body, normalize=_flag(request, "normalize"))
        # also when it was registered already: by a request whose fsync may be under way
        await self.written()
        return result

    async def lookup(self, request: Request, principal: str) -> Any:
        subject = request.path_params["subject"]
        self.require(request, principal, Op.DESCRIBE, subject)
        body = await _body(request)
        return self.registry.lookup(
            subject, body, normalize=_flag(request, "normalize"), deleted=_flag(request, "deleted")
        )

    async def delete_subject(self, request: Request, principal: str) -> Any:
        subject = request.path_params["subject"]
        self.require(request, principal, Op.DELETE, subject)
        result = self.registry.delete_subject(subject, permanent=_flag(request, "permanent"))
        await self.written()
        return result

    async def delete_version(self, request: Request, principal: str) -> Any:
        subject = request.path_params["subject"]
        self.require(request, principal, Op.DELETE, subject)
        version = request.path_params["version"]
        result = self.registry.delete_version(
            subject, version, permanent=_flag(request, "permanent")
        )
        await self.written()
        return result

    # -- config, mode, compatibility -----------------------------------------------------

    async def get_config(self, request: Request, principal: str) -> Any:
        subject = request.path_params.get("subject")
        self.require(request, principal, Op.DESCRIBE_CONFIGS, subject)
        default = _flag(request, "defaultToGlobal")
        return {"compatibilityLevel": self.registry.config(subject, default_to_global=default)}

    async def put_config(self, request: Request, principal: str) -> Any:
        subject = request.path_params.get("subject")
        self.require(request, principal, Op.ALTER_CONFIGS, subject)
        body = await _body(request)
        level = body.get("compatibility", body.get("compatibilityLevel"))
        if level is None and body:  # only settings seglog does not keep (normalize, ...)
            return {"compatibility": self.registry.config(subject, default_to_global=True)}
        level = self.registry.set_config(subject, level)
        await self.written()
        return {"compatibility": level}

    async def delete_config(self, request: Request, principal: str) -> Any:
        subject = request.path_params.get("subject")
        self.require(request, principal, Op.ALTER_CONFIGS, subject)
        previous = self.registry.delete_config(subject)
        await self.written()
        return {"compatibilityLevel": previous}

    async def get_mode(self, request: Request, principal: str) -> Any:
        subject = request.path_params.get("subject")
        self.require(request, principal, Op.DESCRIBE_CONFIGS, subject)
        default = _flag(request, "defaultToGlobal")
        return {"mode": self.registry.mode(subject, default_to_global=default)}

    async def put_mode(self, request: Request, principal: str) -> Any:
        subject = request.path_params.get("subject")
        self.require(request, principal, Op.ALTER_CONFIGS, subject)
        body = await _body(request)
        mode = self.registry.set_mode(subject, body.get("mode"), force=_flag(request, "force"))
        await self.written()
        return {"mode": mode}

    async def delete_mode(self, request: Request, principal: str) -> Any:
        subject = request.path_params["subject"]
        self.require(request, principal, Op.ALTER_CONFIGS, subject)
        previous = self.registry.delete_mode(subject)
        await self.written()
        return {"mode": previous}

    async def compatibility(self, request: Request, principal: str) -> Any:
        subject = request.path_params["subject"]
        self.require(request, principal, Op.DESCRIBE, subject)
        body = await _body(request)
        version = request.path_params.get("version")
        messages = self.registry.check(
            subject, version, body, normalize=_flag(request, "normalize")
        )
        out: dict[str, Any] = {"is_compatible": not messages}
        if _flag(request, "verbose"):
            out["messages"] = messages
        return out


async def _http_error(_request: Request, exc: Exception) -> Response:
    assert isinstance(exc, HTTPException)
    return _error(exc.status_code, exc.status_code, f"HTTP {exc.status_code} {exc.detail}")


async def _internal_error(_request: Request, exc: Exception) -> Response:
    log.exception("schema registry request failed", exc_info=exc)
    return _error(500, 50001, f"Internal error: {type(exc).__name__}")


def registry_app(
    registry: Registry, access: Access, durable: Callable[[], Awaitable[None]]
) -> Starlette:
    """The ASGI application of the REST API over ``registry``; ``durable()`` returns
    once the registry's writes so far are durable."""
    api = _Api(registry, access, durable)
    e = api.endpoint
    subject = "/subjects/{subject}"
    version = subject + "/versions/{version}"
    routes = [
        Route("/", e(api.root), methods=["GET"]),
        Route("/contexts", e(api.contexts), methods=["GET"]),
        Route("/schemas", e(api.schemas), methods=["GET"]),
        Route("/schemas/types", e(api.types), methods=["GET"]),
        Route("/schemas/ids/{id:int}", e(api.schema_by_id), methods=["GET"]),
        Route("/schemas/ids/{id:int}/schema", e(api.raw_schema_by_id), methods=["GET"]),
        Route("/schemas/ids/{id:int}/subjects", e(api.id_subjects), methods=["GET"]),
        Route("/schemas/ids/{id:int}/versions", e(api.id_versions), methods=["GET"]),
        Route("/subjects", e(api.subjects), methods=["GET"]),
        Route(subject, e(api.lookup), methods=["POST"]),
        Route(subject, e(api.delete_subject), methods=["DELETE"]),
        Route(subject + "/versions", e(api.subject_versions), methods=["GET"]),
        Route(subject + "/versions", e(api.register), methods=["POST"]),
        Route(version, e(api.get_version), methods=["GET"]),
        Route(version, e(api.delete_version), methods=["DELETE"]),
        Route(version + "/schema", e(api.get_version_schema), methods=["GET"]),
        Route(version + "/referencedby", e(api.referenced_by), methods=["GET"]),
        Route("/config", e(api.get_config), methods=["GET"]),
        Route("/config", e(api.put_config), methods=["PUT"]),
        Route("/config", e(api.delete_config), methods=["DELETE"]),
        Route("/config/{subject}", e(api.get_config), methods=["GET"]),
        Route("/config/{subject}", e(api.put_config), methods=["PUT"]),
        Route("/config/{subject}", e(api.delete_config), methods=["DELETE"]),
        Route("/mode", e(api.get_mode), methods=["GET"]),
        Route("/mode", e(api.put_mode), methods=["PUT"]),
        Route("/mode/{subject}", e(api.get_mode), methods=["GET"]),
        Route("/mode/{subject}", e(api.put_mode), methods=["PUT"]),
        Route("/mode/{subject}", e(api.delete_mode), methods=["DELETE"]),
        Route("/compatibility" + subject + "/versions", e(api.compatibility), methods=["POST"]),
        Route("/compatibility" + version, e(api.compatibility), methods=["POST"]),
    ]
    return Starlette(
        routes=routes,
        exception_handlers={HTTPException: _http_error, Exception: _internal_error},
    )
