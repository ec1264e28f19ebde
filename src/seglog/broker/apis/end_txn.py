"""EndTxn (API 26) and WriteTxnMarkers (API 27): ending a transaction, from its producer
(through the coordinator) or by writing markers directly (Kafka's inter-broker request,
which ``kafka-transactions.sh abort`` / ``seglog transactions abort`` also send)."""

from __future__ import annotations

import logging
from typing import Any

from kafka.protocol.producer import EndTxnResponse, WriteTxnMarkersResponse

from seglog.broker.context import BrokerContext, RequestContext
from seglog.broker.coordinator.txn_markers import write_marker
from seglog.broker.protocol import errors as _errors
from seglog.broker.security.authorizer import CLUSTER_NAME, Op, Res
from seglog.errors import SeglogError

__all__ = ["handle_end_txn", "handle_write_txn_markers"]

log = logging.getLogger(__name__)

_Marker = WriteTxnMarkersResponse.WritableTxnMarkerResult
_Topic = _Marker.WritableTxnMarkerTopicResult
_Partition = _Topic.WritableTxnMarkerPartitionResult


def handle_end_txn(ctx: BrokerContext, rctx: RequestContext, req: Any) -> Any:
    """Commit (``committed``) or abort the producer's transaction; answered once the
    Prepare state is durable and the markers appended. 53 without WRITE on the
    transactional id; else :meth:`TransactionCoordinator.end_txn`'s code (48 with no
    transaction, 49, 90/47, 51)."""
    version = rctx.api_version
    resp = EndTxnResponse[version]
    if not rctx.allowed(Op.WRITE, Res.TRANSACTIONAL_ID, req.transactional_id):
        return resp(throttle_time_ms=0, error_code=_errors.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)

    async def end() -> Any:
        code = await ctx.transactions.end_txn(
            req.transactional_id, req.producer_id, req.producer_epoch, bool(req.committed), version
        )
        return resp(throttle_time_ms=0, error_code=code)

    return end()


def handle_write_txn_markers(ctx: BrokerContext, rctx: RequestContext, req: Any) -> Any:
    """Append each requested COMMIT/ABORT marker to its partitions (the producer's open
    transaction there ends; storage refuses a marker with an epoch older than the
    producer's). Needs CLUSTER_ACTION on the cluster (31 for every partition); 3 for an
    unknown partition; a storage refusal gets its code."""
    version = rctx.api_version
    allowed = rctx.allowed(Op.CLUSTER_ACTION, Res.CLUSTER, CLUSTER_NAME)

    async def write() -> Any:
        markers = []
        for m in req.markers:
            topics = []
            for t in m.topics:
                parts = []
                for p in t.partition_indexes:
                    code = _errors.NONE
                    if not allowed:
                        code = _errors.CLUSTER_AUTHORIZATION_FAILED
                    else:
                        try:
                            fut = write_marker(
                                ctx.topics,
                                t.name,
                                p,
                                m.producer_id,
                                m.producer_epoch,
                                commit=bool(m.transaction_result),
                                coordinator_epoch=m.coordinator_epoch,
                            )
                            if fut is not None:
                                await fut
                        except (SeglogError, OSError) as exc:
                            log.warning("marker for %s-%d not written: %s", t.name, p, exc)
                            code = _errors.error_code(exc)
                    parts.append(_Partition(partition_index=p, error_code=code))
                topics.append(_Topic(name=t.name, partitions=parts))
            markers.append(_Marker(producer_id=m.producer_id, topics=topics))
        return WriteTxnMarkersResponse[version](markers=markers)

    return write()
