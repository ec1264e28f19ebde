"""InitProducerId (API 22): producer ids and epochs for idempotent producers."""

from __future__ import annotations

from typing import Any

from kafka.protocol.producer import InitProducerIdResponse

from seglog.broker.context import BrokerContext, RequestContext
from seglog.broker.protocol import errors as _errors
from seglog.broker.security.authorizer import CLUSTER_NAME, Op, Res

__all__ = ["handle_init_producer_id"]


def handle_init_producer_id(ctx: BrokerContext, rctx: RequestContext, req: Any) -> Any:
    """A new producer id with epoch 0 (ids persist across restarts); v3+ with a known
    producer id and epoch bumps the epoch (KIP-360). Transactional ids are not supported:
    35 UNSUPPORTED_VERSION."""
    version = rctx.api_version
    resp = InitProducerIdResponse[version]
    if not rctx.allowed(Op.IDEMPOTENT_WRITE, Res.CLUSTER, CLUSTER_NAME):
        return resp(
            throttle_time_ms=0,
            error_code=_errors.CLUSTER_AUTHORIZATION_FAILED,
            producer_id=-1,
            producer_epoch=-1,
        )
    if req.transactional_id is not None:
        return resp(
            throttle_time_ms=0,
            error_code=_errors.UNSUPPORTED_VERSION,
            producer_id=-1,
            producer_epoch=-1,
        )
    if version >= 3 and req.producer_id >= 0 and 0 <= req.producer_epoch < 32766:
        return resp(
            throttle_time_ms=0,
            error_code=0,
            producer_id=req.producer_id,
            producer_epoch=req.producer_epoch + 1,
        )
    return resp(
        throttle_time_ms=0, error_code=0, producer_id=ctx.state.next_producer_id(), producer_epoch=0
    )
