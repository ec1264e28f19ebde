"""InitProducerId (API 22): producer ids and epochs for idempotent and transactional
producers (KIP-98, KIP-360, KIP-588)."""

from __future__ import annotations

from typing import Any

from kafka.protocol.producer import InitProducerIdResponse

from seglog.broker.context import BrokerContext, RequestContext
from seglog.broker.protocol import errors as _errors
from seglog.broker.security.authorizer import CLUSTER_NAME, Op, Res

__all__ = ["handle_init_producer_id"]


def handle_init_producer_id(ctx: BrokerContext, rctx: RequestContext, req: Any) -> Any:
    """Without a transactional id: a new producer id with epoch 0 (ids persist across
    restarts); v3+ with a known producer id and epoch bumps the epoch (KIP-360); needs
    IDEMPOTENT_WRITE on the cluster (31). With one: the transaction coordinator's answer
    (:meth:`TransactionCoordinator.init_producer_id`: epoch bump and fencing, 50 for a
    timeout above ``transaction.max.timeout.ms``, 51 while the previous transaction is
    being ended, 90/47 for a stale producer); needs WRITE on the TRANSACTIONAL_ID (53); an
    empty id is 42 INVALID_REQUEST."""
    version = rctx.api_version
    resp = InitProducerIdResponse[version]

    def answer(code: int, pid: int = -1, epoch: int = -1) -> Any:
        return resp(throttle_time_ms=0, error_code=code, producer_id=pid, producer_epoch=epoch)

    txn_id = req.transactional_id
    if txn_id is not None:
        if not rctx.allowed(Op.WRITE, Res.TRANSACTIONAL_ID, txn_id):
            return answer(_errors.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
        if txn_id == "":
            return answer(_errors.INVALID_REQUEST)
        producer_id = req.producer_id if version >= 3 else -1
        producer_epoch = req.producer_epoch if version >= 3 else -1

        async def transactional() -> Any:
            code, pid, epoch = await ctx.transactions.init_producer_id(
                txn_id, req.transaction_timeout_ms, producer_id, producer_epoch, version
            )
            return answer(code, pid, epoch)

        return transactional()
    if not rctx.allowed(Op.IDEMPOTENT_WRITE, Res.CLUSTER, CLUSTER_NAME):
        return answer(_errors.CLUSTER_AUTHORIZATION_FAILED)
    if version >= 3 and req.producer_id >= 0 and 0 <= req.producer_epoch < 32766:
        return answer(0, req.producer_id, req.producer_epoch + 1)
    return answer(0, ctx.state.next_producer_id(), 0)
