"""DescribeTransactions (API 65) and ListTransactions (API 66, v0-2): the transaction
coordinator's state for operators (KIP-664, ``kafka-transactions.sh``)."""

from __future__ import annotations

import re
import time
from typing import Any

from kafka.protocol.admin import DescribeTransactionsResponse, ListTransactionsResponse

from seglog.broker.context import BrokerContext, RequestContext
from seglog.broker.coordinator.txn_model import TransactionMetadata, TxnState
from seglog.broker.protocol import errors as _errors
from seglog.broker.security.authorizer import Op, Res

__all__ = ["handle_describe_transactions", "handle_list_transactions"]

_DState = DescribeTransactionsResponse.TransactionState
_DTopic = _DState.TopicData
_LState = ListTransactionsResponse.TransactionState


def _describe_one(ctx: BrokerContext, rctx: RequestContext, txn_id: str) -> Any:
    meta = ctx.transactions.get(txn_id)
    code = _errors.NONE
    if not rctx.allowed(Op.DESCRIBE, Res.TRANSACTIONAL_ID, txn_id):
        code = _errors.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
    elif meta is None:
        code = _errors.TRANSACTIONAL_ID_NOT_FOUND
    if code != _errors.NONE or meta is None:
        return _DState(
            error_code=code,
            transactional_id=txn_id,
            transaction_state="",
            transaction_timeout_ms=0,
            transaction_start_time_ms=-1,
            producer_id=-1,
            producer_epoch=-1,
            topics=[],
        )
    by_topic: dict[str, list[int]] = {}
    for topic, partition in sorted(meta.partitions):
        if rctx.allowed(Op.DESCRIBE, Res.TOPIC, topic):  # Kafka leaves unauthorized topics out
            by_topic.setdefault(topic, []).append(partition)
    return _DState(
        error_code=0,
        transactional_id=txn_id,
        transaction_state=meta.state.kafka_name,
        transaction_timeout_ms=meta.timeout_ms,
        transaction_start_time_ms=meta.start_ms,
        producer_id=meta.producer_id,
        producer_epoch=meta.producer_epoch,
        topics=[_DTopic(topic=t, partitions=ps) for t, ps in by_topic.items()],
    )


def handle_describe_transactions(ctx: BrokerContext, rctx: RequestContext, req: Any) -> Any:
    """Each id's state, timeout, start time (-1 when none is ongoing), producer id and
    epoch and partitions: 53 without DESCRIBE on the id, 105 TRANSACTIONAL_ID_NOT_FOUND for
    an unknown one."""
    states = [_describe_one(ctx, rctx, txn_id) for txn_id in req.transactional_ids]
    return DescribeTransactionsResponse[rctx.api_version](
        throttle_time_ms=0, transaction_states=states
    )


def _matches(
    meta: TransactionMetadata,
    states: set[TxnState],
    pids: set[int],
    min_duration_ms: int,
    pattern: re.Pattern[str] | None,
) -> bool:
    if states and meta.state not in states:
        return False
    if pids and meta.producer_id not in pids:
        return False
    running_ms = time.time() * 1000 - meta.start_ms
    if min_duration_ms >= 0 and (meta.start_ms < 0 or running_ms <= min_duration_ms):
        return False  # v1: only transactions running longer than the filter
    return pattern is None or pattern.search(meta.transactional_id) is not None


def handle_list_transactions(ctx: BrokerContext, rctx: RequestContext, req: Any) -> Any:
    """Transactional ids the principal may DESCRIBE, filtered by state names (unknown ones
    are listed back in ``unknown_state_filters``), producer ids, v1's duration (ms running,
    -1: any) and v2's transactional id regular expression (128 INVALID_REGULAR_EXPRESSION
    for one that does not compile)."""
    version = rctx.api_version
    resp = ListTransactionsResponse[version]
    states: set[TxnState] = set()
    unknown = []
    for name in req.state_filters:
        state = TxnState.by_kafka_name(name)
        if state is None:
            unknown.append(name)
        else:
            states.add(state)
    pattern = None
    text = req.transactional_id_pattern if version >= 2 else None
    if text:
        try:
            pattern = re.compile(text)
        except re.error:
            return resp(
                throttle_time_ms=0,
                error_code=_errors.INVALID_REGULAR_EXPRESSION,
                unknown_state_filters=[],
                transaction_states=[],
            )
    duration = req.duration_filter if version >= 1 else -1
    found = [
        _LState(
            transactional_id=m.transactional_id,
            producer_id=m.producer_id,
            transaction_state=m.state.kafka_name,
        )
        for m in ctx.transactions.all()
        if rctx.allowed(Op.DESCRIBE, Res.TRANSACTIONAL_ID, m.transactional_id)
        and _matches(m, states, set(req.producer_id_filters), duration, pattern)
    ]
    return resp(
        throttle_time_ms=0, error_code=0, unknown_state_filters=unknown, transaction_states=found
    )
