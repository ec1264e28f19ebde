"""DescribeClientQuotas (API 48) and AlterClientQuotas (API 49), v0-1, over the client
quota configs (:class:`~seglog.broker.security.client_quotas.QuotaStore`; KIP-546).

Describe needs DESCRIBE_CONFIGS on the cluster, Alter ALTER_CONFIGS (31
CLUSTER_AUTHORIZATION_FAILED otherwise, for the whole describe / every alter entry, as
Kafka). A bad describe filter is the response's error (42 INVALID_REQUEST, 35
UNSUPPORTED_VERSION for an unknown entity type); each alter entry succeeds or fails alone
(42 INVALID_REQUEST: bad entity, unknown key, value not positive or not integral for a
byte or connection rate, an entity or key twice) and the valid ones are applied and
persisted together unless ``validate_only``. A default entity has a null name.
"""

from __future__ import annotations

from typing import Any

from kafka.protocol.admin import AlterClientQuotasResponse, DescribeClientQuotasResponse

from seglog.broker.context import BrokerContext, RequestContext
from seglog.broker.protocol.errors import CLUSTER_AUTHORIZATION_FAILED, INVALID_REQUEST
from seglog.broker.security.authorizer import CLUSTER_NAME, Op, Res
from seglog.broker.security.client_quotas import Entity, FilterComponent, QuotaError

__all__ = ["handle_alter_client_quotas", "handle_describe_client_quotas"]

_DEntry = DescribeClientQuotasResponse.EntryData
_AEntry = AlterClientQuotasResponse.EntryData


def handle_describe_client_quotas(ctx: BrokerContext, rctx: RequestContext, req: Any) -> Any:
    """The entities matching ``components`` (and ``strict``) with their quota values."""
    response = DescribeClientQuotasResponse[rctx.api_version]
    if not rctx.allowed(Op.DESCRIBE_CONFIGS, Res.CLUSTER, CLUSTER_NAME):
        return response(
            throttle_time_ms=0,
            error_code=CLUSTER_AUTHORIZATION_FAILED,
            error_message=f"{rctx.principal} may not describe client quotas",
            entries=None,
        )
    assert ctx.quotas is not None
    components = [FilterComponent(c.entity_type, c.match_type, c.match) for c in req.components]
    try:
        found = ctx.quotas.store.describe(components, bool(req.strict))
    except QuotaError as exc:
        return response(
            throttle_time_ms=0, error_code=exc.code, error_message=str(exc), entries=None
        )
    entries = [
        _DEntry(
            entity=[_DEntry.EntityData(entity_type=t, entity_name=n) for t, n in entity],
            values=[_DEntry.ValueData(key=k, value=float(v)) for k, v in sorted(values.items())],
        )
        for entity, values in found
    ]
    return response(throttle_time_ms=0, error_code=0, error_message=None, entries=entries)


def handle_alter_client_quotas(ctx: BrokerContext, rctx: RequestContext, req: Any) -> Any:
    """Check every entry, then apply (and persist) the valid ones unless validate_only."""
    allowed = rctx.allowed(Op.ALTER_CONFIGS, Res.CLUSTER, CLUSTER_NAME)
    assert ctx.quotas is not None
    store = ctx.quotas.store
    results = []
    valid: list[tuple[Entity, dict[str, float | None]]] = []
    seen: set[tuple[tuple[str, str | None], ...]] = set()
    for entry in req.entries:
        parts = [(e.entity_type, e.entity_name) for e in entry.entity]
        code, message = 0, None
        if not allowed:
            code = CLUSTER_AUTHORIZATION_FAILED
            message = f"{rctx.principal} may not alter client quotas"
        else:
            try:
                entity, changes = store.check_alteration(
                    parts, [(op.key, op.value, op.remove) for op in entry.ops]
                )
                if entity in seen:
                    raise QuotaError(INVALID_REQUEST, f"Ignoring duplicate entity {parts}")
                seen.add(entity)
                valid.append((entity, changes))
            except QuotaError as exc:
                code, message = exc.code, str(exc)
        results.append(
            _AEntry(
                error_code=code,
                error_message=message,
                entity=[_AEntry.EntityData(entity_type=t, entity_name=n) for t, n in parts],
            )
        )
    if valid and not req.validate_only:
        store.apply(valid)
    return AlterClientQuotasResponse[rctx.api_version](throttle_time_ms=0, entries=results)
