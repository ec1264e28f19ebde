"""CreateAcls (API 30), DescribeAcls (API 29) and DeleteAcls (API 31) over
:class:`Authorizer`. They need ALTER (create, delete) or DESCRIBE (describe) on the
cluster (31 CLUSTER_AUTHORIZATION_FAILED otherwise); without an authorizer they answer
54 SECURITY_DISABLED, as Kafka does; an ACL with ANY/UNKNOWN fields is 42 INVALID_REQUEST.
"""

from __future__ import annotations

from typing import Any

from kafka.protocol.admin import CreateAclsResponse, DeleteAclsResponse, DescribeAclsResponse

from seglog.broker.context import BrokerContext, RequestContext
from seglog.broker.protocol.errors import (
    CLUSTER_AUTHORIZATION_FAILED,
    INVALID_REQUEST,
    SECURITY_DISABLED,
)
from seglog.broker.security.authorizer import CLUSTER_NAME, Acl, AclFilter, Op, Res

__all__ = [
    "handle_create_acls",
    "handle_delete_acls",
    "handle_describe_acls",
]


def _filter(f: Any, prefix: str) -> AclFilter:
    return AclFilter(
        getattr(f, f"{prefix}resource_type_filter"),
        getattr(f, f"{prefix}resource_name_filter"),
        getattr(f, f"{prefix}pattern_type_filter"),
        getattr(f, f"{prefix}principal_filter"),
        getattr(f, f"{prefix}host_filter"),
        f.operation,
        f.permission_type,
    )


def _refusal(ctx: BrokerContext, rctx: RequestContext, operation: int) -> tuple[int, str] | None:
    if ctx.authorizer is None or not ctx.authorizer.enabled:
        return SECURITY_DISABLED, "no authorizer is configured (seglog serve --authorizer)"
    if not rctx.allowed(operation, Res.CLUSTER, CLUSTER_NAME):
        return CLUSTER_AUTHORIZATION_FAILED, f"{rctx.principal} may not manage ACLs"
    return None


def handle_create_acls(ctx: BrokerContext, rctx: RequestContext, req: Any) -> Any:
    """Add ACL bindings; each creation succeeds or fails alone."""
    version = rctx.api_version
    result_cls = CreateAclsResponse.AclCreationResult
    refused = _refusal(ctx, rctx, Op.ALTER)
    results = []
    valid: list[Acl] = []
    for c in req.creations:
        if refused is not None:
            results.append(result_cls(error_code=refused[0], error_message=refused[1]))
            continue
        acl = Acl(
            c.resource_type, c.resource_name, c.resource_pattern_type,
            c.principal, c.host, c.operation, c.permission_type,
        )  # fmt: skip
        try:
            acl.validate()
        except ValueError as exc:
            results.append(result_cls(error_code=INVALID_REQUEST, error_message=str(exc)))
            continue
        valid.append(acl)
        results.append(result_cls(error_code=0, error_message=None))
    if valid and ctx.authorizer is not None:
        ctx.authorizer.add(valid)
    return CreateAclsResponse[version](throttle_time_ms=0, results=results)


def handle_describe_acls(ctx: BrokerContext, rctx: RequestContext, req: Any) -> Any:
    """The bindings matching the filter, grouped by resource pattern."""
    version = rctx.api_version
    resp = DescribeAclsResponse[version]
    refused = _refusal(ctx, rctx, Op.DESCRIBE)
    if refused is not None or ctx.authorizer is None:
        code, message = refused or (SECURITY_DISABLED, None)
        return resp(throttle_time_ms=0, error_code=code, error_message=message, resources=[])
    flt = AclFilter(
        req.resource_type_filter, req.resource_name_filter, req.pattern_type_filter,
        req.principal_filter, req.host_filter, req.operation, req.permission_type,
    )  # fmt: skip
    grouped: dict[tuple[int, str, int], list[Any]] = {}
    for a in ctx.authorizer.acls:
        if flt.matches(a):
            grouped.setdefault((a.resource_type, a.resource_name, a.pattern_type), []).append(
                resp.DescribeAclsResource.AclDescription(
                    principal=a.principal,
                    host=a.host,
                    operation=a.operation,
                    permission_type=a.permission_type,
                )
            )
    resources = [
        resp.DescribeAclsResource(resource_type=t, resource_name=n, pattern_type=p, acls=acls)
        for (t, n, p), acls in grouped.items()
    ]
    return resp(throttle_time_ms=0, error_code=0, error_message=None, resources=resources)


def handle_delete_acls(ctx: BrokerContext, rctx: RequestContext, req: Any) -> Any:
    """Remove the bindings matching each filter; each filter reports what it removed."""
    version = rctx.api_version
    result_cls = DeleteAclsResponse.DeleteAclsFilterResult
    matching_cls = result_cls.DeleteAclsMatchingAcl
    refused = _refusal(ctx, rctx, Op.ALTER)
    results = []
    for f in req.filters:
        if refused is not None or ctx.authorizer is None:
            code, message = refused or (SECURITY_DISABLED, None)
            results.append(result_cls(error_code=code, error_message=message, matching_acls=[]))
            continue
        gone = ctx.authorizer.remove(_filter(f, ""))
        results.append(
            result_cls(
                error_code=0,
                error_message=None,
                matching_acls=[
                    matching_cls(
                        error_code=0,
                        error_message=None,
                        resource_type=a.resource_type,
                        resource_name=a.resource_name,
                        pattern_type=a.pattern_type,
                        principal=a.principal,
                        host=a.host,
                        operation=a.operation,
                        permission_type=a.permission_type,
                    )
                    for a in gone
                ],
            )
        )
    return DeleteAclsResponse[version](throttle_time_ms=0, filter_results=results)
