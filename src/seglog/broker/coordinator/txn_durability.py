"""Whether a transaction's records are durable, for the coordinator: Produce answers
transactional batches before their fsync, so a commit first waits for the fsync of every
data partition of the transaction (:func:`wait_durable`), and a transaction found Ongoing
at start is kept only when every data partition was shut down cleanly
(:func:`shut_down_cleanly`: ``Log.clean_start``)."""

from __future__ import annotations

import asyncio
from collections.abc import Iterable

from seglog.broker.log.topics import TopicManager
from seglog.errors import SeglogError, UnknownTopicError

__all__ = ["shut_down_cleanly", "wait_durable"]


async def wait_durable(
    topics: TopicManager, partitions: Iterable[tuple[str, int]]
) -> BaseException | None:
    """Wait until every partition is durable up to its log end offset at the call (all
    in parallel; usually done already, each append having asked for its fsync). Returns
    the first error (the log offline after an fsync error, or closed), else None. A
    partition deleted meanwhile is skipped (it gets no marker either); a log under a
    relaxed flush policy (``flush.messages`` / ``flush.ms``) promises nothing and is not
    waited for."""
    waits: list[asyncio.Future[int]] = []
    for topic, partition in sorted(partitions):
        try:
            plog = topics.log(topic, partition)
        except UnknownTopicError:
            continue
        except (SeglogError, OSError) as exc:
            return exc
        end = plog.log_end_offset
        if plog.config.fsync_before_ack and plog.high_watermark < end:
            waits.append(asyncio.wrap_future(plog.sync_future(end)))
    if not waits:
        return None
    results = await asyncio.gather(*waits, return_exceptions=True)
    return next((r for r in results if isinstance(r, BaseException)), None)


def shut_down_cleanly(topics: TopicManager, partitions: Iterable[tuple[str, int]]) -> bool:
    """Whether every partition was opened after a clean shutdown (``Log.clean_start``: all
    it held was fsynced at close), so no record acknowledged before its fsync can be
    missing. A deleted partition counts as clean (nothing left to lose), an offline one
    as not (nothing can be told)."""
    for topic, partition in partitions:
        try:
            if not topics.log(topic, partition).clean_start:
                return False
        except UnknownTopicError:
            continue
        except SeglogError:
            return False
    return True
