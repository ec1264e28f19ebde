"""DeleteRecords (API 21): move partitions' log start offset (low watermark) forward.

Per partition: ``offset`` -1 means the high watermark; an offset above the high watermark
or below -1 gets 1 OFFSET_OUT_OF_RANGE; an unknown topic or partition 3
UNKNOWN_TOPIC_OR_PARTITION (whatever the offset). On success the answer carries the new
low watermark (the log start offset, persisted: it survives a restart); the closed
segments wholly below it are removed (through ``--log-archive-command`` when set).
Fetches below it then get OFFSET_OUT_OF_RANGE and consumers reset. The file work runs in
a thread, off the loop.
"""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine
from typing import Any

from kafka.protocol.admin import DeleteRecordsResponse

from seglog.broker.context import BrokerContext, RequestContext
from seglog.broker.protocol import errors as _errors
from seglog.broker.security.authorizer import Op, Res
from seglog.errors import SeglogError
from seglog.storage import Log, trim_by_offset

__all__ = ["handle_delete_records"]

_Topic = DeleteRecordsResponse.DeleteRecordsTopicResult
_Partition = _Topic.DeleteRecordsPartitionResult

_Plan = list[tuple[str, list[tuple[int, Log | None, int, int]]]]  # topic, [(p, log, offset, err)]


def _delete(plan: _Plan, archive: str | None) -> list[Any]:
    topics = []
    for name, parts in plan:
        results = []
        for partition, plog, offset, planned in parts:
            low, code = -1, planned
            if plog is not None and code == _errors.NONE:
                try:
                    target = plog.high_watermark if offset == -1 else offset
                    if not 0 <= target <= plog.high_watermark:
                        code = _errors.OFFSET_OUT_OF_RANGE
                    else:
                        low = trim_by_offset(plog, target, archive=archive).log_start_offset
                except (SeglogError, OSError) as exc:
                    code = _errors.error_code(exc)
                if code != _errors.NONE:
                    low = plog.log_start_offset
            results.append(
                _Partition(partition_index=partition, low_watermark=low, error_code=code)
            )
        topics.append(_Topic(name=name, partitions=results))
    return topics


def handle_delete_records(
    ctx: BrokerContext, rctx: RequestContext, req: Any
) -> Coroutine[Any, Any, Any]:
    """Resolve the partitions on the loop, delete in a worker thread, answer."""
    version = rctx.api_version
    plan: _Plan = []
    for t in req.topics:
        parts = []
        for p in t.partitions:
            plog: Log | None = None
            code = _errors.NONE
            try:
                if not rctx.allowed(Op.DELETE, Res.TOPIC, t.name):
                    code = _errors.TOPIC_AUTHORIZATION_FAILED
                else:
                    plog = ctx.topics.log(t.name, p.partition_index)
            except SeglogError as exc:
                code = _errors.error_code(exc)
            if code == _errors.NONE and p.offset < -1:  # after 29 and 3, as Kafka checks
                code = _errors.OFFSET_OUT_OF_RANGE
            parts.append((p.partition_index, plog, p.offset, code))
        plan.append((t.name, parts))
    archive = ctx.config.log_archive_command

    async def run() -> Any:
        topics = await asyncio.to_thread(_delete, plan, archive)
        return DeleteRecordsResponse[version](throttle_time_ms=0, topics=topics)

    return run()
