"""The transaction coordinator (Kafka's ``TransactionCoordinator``, KIP-98, KIP-360,
KIP-588, KIP-890 part 1): transactional ids, their producer ids and epochs, and the
two-phase end of each transaction.

Every change of a transactional id is written to ``__transaction_state``
(:class:`~seglog.broker.coordinator.txn_log.TransactionStateLog`) and awaited durable
before the coordinator answers; while a write (or the markers of an ending transaction)
is in flight the id is ``pending`` and other requests for it get 51
CONCURRENT_TRANSACTIONS, as Kafka's ``pendingState``. Ending a transaction writes
PrepareCommit/PrepareAbort, then a COMMIT/ABORT control batch to every partition of the
transaction (:mod:`~seglog.broker.coordinator.txn_markers`) and its transactional offsets
to ``__consumer_offsets``, then CompleteCommit/CompleteAbort. EndTxn is answered once the
Prepare record is durable and the markers appended (as Kafka answers after Prepare): the
records are then readable by read_committed consumers, and the offsets are the group's.
The Complete record, and any later record of the id, waits until the markers are durable,
so a crash before then finds the Prepare and completes the transaction again.

Errors are Kafka 4's, by request version (KIP-588): a producer of an older epoch gets 90
PRODUCER_FENCED from InitProducerId v4+, AddPartitionsToTxn/AddOffsetsToTxn/EndTxn v2+,
else 47 INVALID_PRODUCER_EPOCH; a producer id that is not the id's current one 49
INVALID_PRODUCER_ID_MAPPING; a request out of order (EndTxn with no transaction) 48
INVALID_TXN_STATE; a timeout outside (0, ``transaction.max.timeout.ms``] 50
INVALID_TRANSACTION_TIMEOUT.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, Iterable
from typing import Any

from seglog.broker.coordinator.committed import CommittedOffsets
from seglog.broker.coordinator.txn_durability import shut_down_cleanly, wait_durable
from seglog.broker.coordinator.txn_log import TransactionStateLog
from seglog.broker.coordinator.txn_markers import write_markers
from seglog.broker.coordinator.txn_model import (
    MAX_PRODUCER_EPOCH,
    Partition,
    TransactionMetadata,
    TxnState,
)
from seglog.broker.log.internal_topics import INTERNAL_TOPICS, OFFSETS_TOPIC
from seglog.broker.log.producers import ProducerStateTable
from seglog.broker.log.topics import TopicManager
from seglog.broker.protocol import errors as _errors
from seglog.errors import SeglogError
from seglog.storage import Log

__all__ = ["TransactionCoordinator", "fenced_code"]

log = logging.getLogger(__name__)

_OFFSETS_PARTITION: Partition = (OFFSETS_TOPIC, 0)


def fenced_code(fenced_from: int, version: int) -> int:
    """90 PRODUCER_FENCED for a request of ``version`` >= ``fenced_from`` (KIP-588), else
    47 INVALID_PRODUCER_EPOCH (what older clients know)."""
    return _errors.PRODUCER_FENCED if version >= fenced_from else _errors.INVALID_PRODUCER_EPOCH


def _now_ms() -> int:
    return int(time.time() * 1000)


class TransactionCoordinator:
    """Transactional ids of this broker (it is the coordinator of every one). Runs on the
    event loop; ``next_producer_id`` allocates producer ids (the broker's persisted
    counter)."""

    def __init__(
        self,
        topics: TopicManager,
        committed: CommittedOffsets,
        next_producer_id: Callable[[], int],
        *,
        max_timeout_ms: int,
        expiration_ms: int,
        coordinator_epoch: int = 0,
    ) -> None:
        self._topics = topics
        self._committed = committed
        self._next_producer_id = next_producer_id
        self.max_timeout_ms = max_timeout_ms
        self.expiration_ms = expiration_ms
        self.coordinator_epoch = coordinator_epoch
        self._log = TransactionStateLog(topics)
        self._txns: dict[str, TransactionMetadata] = self._log.load()
        self._by_pid: dict[int, TransactionMetadata] = {
            m.producer_id: m for m in self._txns.values()
        }
        self._pending: set[str] = set()
        self._unsettled: dict[str, asyncio.Task[None]] = {}
        """Ids whose last end's markers are appended but not yet durable: the id's next
        record waits for them (see :meth:`_complete`)."""
        self._barriers: dict[int, tuple[Log, int]] = {}
        """Per producer id: where the last AddPartitionsToTxn/AddOffsetsToTxn record of
        its transaction ends in ``__transaction_state`` (:meth:`ongoing_barrier`)."""
        self.commits = 0
        """Transactions committed (metrics)."""
        self.aborts = 0
        """Transactions aborted, timed out ones included (metrics)."""
        self.timeouts = 0
        """Transactions aborted by ``transaction.timeout.ms`` (metrics)."""

    # -- reads ------------------------------------------------------------------------

    def get(self, txn_id: str) -> TransactionMetadata | None:
        """The id's metadata (None when unknown)."""
        return self._txns.get(txn_id)

    def all(self) -> list[TransactionMetadata]:
        """Every transactional id's metadata, by id."""
        return [self._txns[k] for k in sorted(self._txns)]

    def ongoing(self) -> list[TransactionMetadata]:
        """Transactions in flight (Ongoing, PrepareCommit, PrepareAbort)."""
        live = (TxnState.ONGOING, TxnState.PREPARE_COMMIT, TxnState.PREPARE_ABORT)
        return [m for m in self.all() if m.state in live]

    # -- writes -----------------------------------------------------------------------

    async def _write(self, target: TransactionMetadata, *, durable: bool = True) -> tuple[Log, int]:
        """Write ``target`` (durably unless told), then make it the id's state; first wait
        until the markers of the id's last end are durable, so that no record superseding
        its Prepare reaches the log before them. Returns where the record ends
        (:meth:`TransactionStateLog.write`)."""
        settle = self._unsettled.get(target.transactional_id)
        if settle is not None:
            await asyncio.shield(settle)
        written = await self._log.write(target.transactional_id, target, durable=durable)
        old = self._txns.get(target.transactional_id)
        if old is not None and self._by_pid.get(old.producer_id) is old:
            del self._by_pid[old.producer_id]
        self._txns[target.transactional_id] = target
        self._by_pid[target.producer_id] = target
        return written

    async def _guarded(self, txn_id: str, work: Awaitable[int]) -> int:
        """Run ``work`` with ``txn_id`` pending; 51 CONCURRENT_TRANSACTIONS when another
        request already holds it, 15 COORDINATOR_NOT_AVAILABLE (retriable) when a write
        fails (the state already written stays: a Prepare* is completed later)."""
        if txn_id in self._pending:
            if asyncio.iscoroutine(work):
                work.close()
            return _errors.CONCURRENT_TRANSACTIONS
        self._pending.add(txn_id)
        try:
            return await work
        except (SeglogError, OSError) as exc:
            log.error("transactional id %r: %s", txn_id, exc)
            return _errors.COORDINATOR_NOT_AVAILABLE
        finally:
            self._pending.discard(txn_id)

    # -- InitProducerId -----------------------------------------------------------------

    async def init_producer_id(
        self, txn_id: str, timeout_ms: int, producer_id: int, producer_epoch: int, version: int
    ) -> tuple[int, int, int]:
        """(error, producer id, epoch) for InitProducerId with a transactional id. A new id
        gets a new producer id at epoch 0; a known one its epoch bumped (a new producer id
        past :data:`MAX_PRODUCER_EPOCH`), which fences the previous producer; an ongoing
        transaction is aborted first (answer 51, the client retries); ``producer_id`` /
        ``producer_epoch`` >= 0 (v3+, KIP-360) must be the id's current ones (or the ones
        just replaced: a retry gets the same answer), else 90/47."""
        if not 0 < timeout_ms <= self.max_timeout_ms:
            return _errors.INVALID_TRANSACTION_TIMEOUT, -1, -1
        result: list[tuple[int, int, int]] = []

        async def work() -> int:
            result.append(
                await self._init(txn_id, timeout_ms, producer_id, producer_epoch, version)
            )
            return result[0][0]

        code = await self._guarded(txn_id, work())
        return result[0] if result else (code, -1, -1)

    async def _init(
        self, txn_id: str, timeout_ms: int, producer_id: int, producer_epoch: int, version: int
    ) -> tuple[int, int, int]:
        meta = self._txns.get(txn_id)
        now = _now_ms()
        if meta is None:
            target = TransactionMetadata(
                txn_id, self._next_producer_id(), 0, timeout_ms, last_update_ms=now
            )
            await self._write(target)
            return _errors.NONE, target.producer_id, 0
        if producer_id >= 0:
            if (producer_id, producer_epoch) == (meta.last_producer_id, meta.last_producer_epoch):
                return _errors.NONE, meta.producer_id, meta.producer_epoch  # a retry
            if producer_id != meta.producer_id or producer_epoch != meta.producer_epoch:
                return fenced_code(4, version), -1, -1
        if meta.in_prepare:
            return _errors.CONCURRENT_TRANSACTIONS, -1, -1
        if meta.state == TxnState.ONGOING:  # fence the previous producer: abort its transaction
            await self._fence_and_abort(meta, timed_out=False)
            return _errors.CONCURRENT_TRANSACTIONS, -1, -1
        target = meta.copy()
        target.last_producer_id, target.last_producer_epoch = meta.producer_id, meta.producer_epoch
        if meta.producer_epoch >= MAX_PRODUCER_EPOCH:
            target.producer_id, target.producer_epoch = self._next_producer_id(), 0
        else:
            target.producer_epoch = meta.producer_epoch + 1
        target.timeout_ms = timeout_ms
        target.state = TxnState.EMPTY
        target.partitions = set()
        target.start_ms = -1
        target.last_update_ms = now
        await self._write(target)
        return _errors.NONE, target.producer_id, target.producer_epoch

    # -- AddPartitionsToTxn / AddOffsetsToTxn -------------------------------------------

    def _check_producer(
        self, meta: TransactionMetadata | None, producer_id: int, epoch: int, fenced: int
    ) -> int:
        if meta is None or meta.producer_id != producer_id:
            return _errors.INVALID_PRODUCER_ID_MAPPING
        if epoch != meta.producer_epoch:
            return fenced
        return _errors.NONE

    async def add_partitions(
        self,
        txn_id: str,
        producer_id: int,
        producer_epoch: int,
        partitions: Iterable[Partition],
        version: int,
        *,
        verify_only: bool = False,
    ) -> int:
        """Add partitions to the id's transaction (starting it when none is ongoing);
        ``verify_only`` (v4+, KIP-890): only check that they are all in it (48 when not).
        Returns the error for every partition."""
        wanted = set(partitions)
        meta = self._txns.get(txn_id)
        code = self._check_producer(meta, producer_id, producer_epoch, fenced_code(2, version))
        if code != _errors.NONE or meta is None:
            return code
        if verify_only:
            ok = meta.state == TxnState.ONGOING and wanted <= meta.partitions
            return _errors.NONE if ok else _errors.INVALID_TXN_STATE
        if txn_id in self._pending or meta.in_prepare:
            return _errors.CONCURRENT_TRANSACTIONS
        if meta.state == TxnState.ONGOING and wanted <= meta.partitions:
            return _errors.NONE
        if meta.state == TxnState.DEAD:
            return _errors.INVALID_TXN_STATE

        async def work() -> int:
            target = meta.copy()
            now = _now_ms()
            if target.state != TxnState.ONGOING:
                target.state, target.start_ms, target.partitions = TxnState.ONGOING, now, set()
            target.partitions |= wanted
            target.last_update_ms = now
            # answered before the fsync: a record lost with the page cache (power loss) is
            # made up for at the next start, where recover() aborts whatever transaction a
            # partition holds open that the coordinator does not place there; what is
            # acknowledged within the transaction (records, offsets) waits for it
            # (ongoing_barrier), so a restart never forgets a transaction that has any
            self._barriers[target.producer_id] = await self._write(target, durable=False)
            return _errors.NONE

        return await self._guarded(txn_id, work())

    # -- EndTxn -------------------------------------------------------------------------

    async def end_txn(
        self, txn_id: str, producer_id: int, producer_epoch: int, commit: bool, version: int
    ) -> int:
        """Commit or abort the id's ongoing transaction. A retry of a completed end gets 0
        (and resumes one whose markers could not all be written); no transaction, or the
        other result, 48. Raises what writing the state or the markers raises (the id stays
        in Prepare*, completed by a retry, the timeout task or the next start)."""
        meta = self._txns.get(txn_id)
        code = self._check_producer(meta, producer_id, producer_epoch, fenced_code(2, version))
        if code != _errors.NONE or meta is None:
            return code
        if txn_id in self._pending:
            return _errors.CONCURRENT_TRANSACTIONS
        done = TxnState.COMPLETE_COMMIT if commit else TxnState.COMPLETE_ABORT
        if meta.state == done:
            return _errors.NONE
        prepare = TxnState.PREPARE_COMMIT if commit else TxnState.PREPARE_ABORT
        if meta.state not in (TxnState.ONGOING, prepare):  # a Prepare left by a failed write
            return _errors.INVALID_TXN_STATE  # is resumed by a retry of the same end
        return await self._guarded(txn_id, self._complete(meta, commit))

    async def _complete(self, meta: TransactionMetadata, commit: bool) -> int:
        """PrepareCommit/PrepareAbort (durable), then the markers and transactional offsets
        appended, then CompleteCommit/CompleteAbort in memory (also the restart of a
        Prepare found at load). The answer does not wait for the markers' fsync: the
        durable Prepare already decides the outcome (a crash before the markers are
        durable completes the transaction again at the next start), and the Complete
        record is written only once they are durable (:meth:`_settle`), as is any later
        record of the id (:meth:`_write`).

        A commit first waits until every data partition of the transaction is durable up
        to its log end offset (Produce answers transactional batches before their fsync):
        a PrepareCommit is never written for records a crash could still take. When a
        partition cannot be made durable (offline after an fsync error, closed), the
        transaction is aborted instead and the storage error returned
        (:meth:`_abort_undurable`)."""
        if commit and not meta.in_prepare:
            failed = await wait_durable(self._topics, meta.partitions - {_OFFSETS_PARTITION})
            if failed is not None:
                return await self._abort_undurable(meta, failed)
        if not meta.in_prepare:
            target = meta.copy()
            target.state = TxnState.PREPARE_COMMIT if commit else TxnState.PREPARE_ABORT
            target.last_update_ms = _now_ms()
            await self._write(target)
            meta = target
        waits = self._write_markers(meta, commit)
        self._barriers.pop(meta.producer_id, None)
        done = meta.copy()
        done.state = TxnState.COMPLETE_COMMIT if commit else TxnState.COMPLETE_ABORT
        done.partitions = set()
        done.start_ms = -1
        done.last_update_ms = _now_ms()
        self._txns[done.transactional_id] = done
        self._by_pid[done.producer_id] = done
        self._unsettled[done.transactional_id] = asyncio.get_running_loop().create_task(
            self._settle(waits, meta, done)
        )
        if commit:
            self.commits += 1
        else:
            self.aborts += 1
        return _errors.NONE

    async def _abort_undurable(self, meta: TransactionMetadata, failed: BaseException) -> int:
        """Abort ``meta``'s transaction whose records could not all be made durable and
        return the storage error (56 KAFKA_STORAGE_ERROR for an offline log), the code a
        Produce to that partition gets. Not a retriable code: a retried commit would find
        the transaction aborted and get 48 (fatal for clients). librdkafka treats an
        EndTxn error it has no rule for as abortable (``commit_transaction`` raises
        txn_requires_abort), and its abort then finds CompleteAbort and gets 0; the epoch
        is not bumped, so the producer carries on with its next transaction. Kafka itself
        never meets this case: its records are replicated before the Produce answer."""
        log.error(
            "transactional id %r: aborting its commit, records not durable: %s",
            meta.transactional_id,
            failed,
        )
        target = meta.copy()
        target.state = TxnState.PREPARE_ABORT
        target.last_update_ms = _now_ms()
        try:
            await self._write(target)
            await self._complete(target, commit=False)
        except (SeglogError, OSError) as exc:  # the Prepare is completed later
            log.error("transactional id %r: abort not completed: %s", meta.transactional_id, exc)
        return _errors.error_code(failed)

    async def _settle(
        self, waits: list[asyncio.Future[Any]], prepared: TransactionMetadata,
        done: TransactionMetadata,
    ) -> None:  # fmt: skip
        """Once the markers are durable, write the Complete record (unless a newer record
        of the id came meanwhile; not awaited durable: lost in a crash, the Prepare is
        completed again at the next start). If they cannot be made durable the id goes
        back to its Prepare state, which a retry, the timeout task or the next start
        completes."""
        txn_id = done.transactional_id
        try:
            if waits:
                await asyncio.gather(*waits)
            if self._txns.get(txn_id) is done:
                await self._log.write(txn_id, done, durable=False)
        except (SeglogError, OSError) as exc:
            log.warning("transactional id %r: markers not durable: %s", txn_id, exc)
            if self._txns.get(txn_id) is done:
                self._txns[txn_id] = prepared
                self._by_pid[prepared.producer_id] = prepared
        finally:
            if self._unsettled.get(txn_id) is asyncio.current_task():
                del self._unsettled[txn_id]

    def _write_markers(self, meta: TransactionMetadata, commit: bool) -> list[asyncio.Future[Any]]:
        """Append the markers and end the transactional offsets (applied at once: the
        durable Prepare makes them final); returns the durability futures."""
        data = [p for p in meta.partitions if p != _OFFSETS_PARTITION]
        waits = write_markers(
            self._topics,
            data,
            meta.producer_id,
            meta.producer_epoch,
            commit=commit,
            coordinator_epoch=self.coordinator_epoch,
        )
        fut, offsets = self._committed.complete_txn(meta.producer_id, commit)
        if fut is not None:
            waits.append(asyncio.wrap_future(fut))
        for group, committed in offsets.items():
            self._committed.apply(group, committed)
        return waits

    async def settled(self) -> None:
        """Wait until every ended transaction's markers are durable (shutdown, tests)."""
        while self._unsettled:
            await asyncio.gather(*self._unsettled.values(), return_exceptions=True)

    async def _fence_and_abort(self, meta: TransactionMetadata, *, timed_out: bool) -> None:
        """Abort an ongoing transaction with the epoch bumped (Kafka's
        ``prepareFenceProducerEpoch``): its producer is fenced, the markers carry the new
        epoch."""
        target = meta.copy()
        if target.producer_epoch < MAX_PRODUCER_EPOCH:
            target.last_producer_id, target.last_producer_epoch = -1, -1
            target.producer_epoch += 1
        target.state = TxnState.PREPARE_ABORT
        target.last_update_ms = _now_ms()
        await self._write(target)
        if timed_out:
            self.timeouts += 1
        await self._complete(target, commit=False)

    # -- TxnOffsetCommit / produce checks -----------------------------------------------

    def check_offsets_commit(self, txn_id: str, producer_id: int, producer_epoch: int) -> int:
        """Before a TxnOffsetCommit: the producer is the id's current one (49/47) and
        AddOffsetsToTxn put the offsets partition in its ongoing transaction (48)."""
        meta = self._txns.get(txn_id)
        code = self._check_producer(
            meta, producer_id, producer_epoch, _errors.INVALID_PRODUCER_EPOCH
        )
        if code != _errors.NONE or meta is None:
            return code
        if meta.state != TxnState.ONGOING or _OFFSETS_PARTITION not in meta.partitions:
            return _errors.INVALID_TXN_STATE
        return _errors.NONE

    def check_produce(
        self, producer_id: int, producer_epoch: int, topic: str, partition: int
    ) -> int:
        """Before appending a transactional batch (KIP-890 part 1, the coordinator being in
        this process: the check is synchronous with the append): 47 for an epoch older than
        the producer's current one, 48 unless the partition is in the producer's ongoing
        transaction (a write of an ended transaction cannot join the next one: the next
        one's AddPartitionsToTxn has not happened yet, or its sequence check fails)."""
        meta = self._by_pid.get(producer_id)
        if meta is None or meta.producer_id != producer_id:
            return _errors.INVALID_TXN_STATE
        if producer_epoch < meta.producer_epoch:
            return _errors.INVALID_PRODUCER_EPOCH
        if producer_epoch != meta.producer_epoch or meta.state != TxnState.ONGOING:
            return _errors.INVALID_TXN_STATE
        if (topic, partition) not in meta.partitions:
            return _errors.INVALID_TXN_STATE
        return _errors.NONE

    def ongoing_barrier(self, producer_id: int) -> tuple[Log, int] | None:
        """(``__transaction_state``'s log, end offset) that must be durable before anything
        of ``producer_id``'s transaction is acknowledged (its transactional records, its
        transactional offsets): the record that put the partitions in the transaction.
        Otherwise a power loss could take that record and leave the previous transaction's
        CompleteCommit as the id's state, and an EndTxn(commit) sent after the restart would
        be taken for a retry of that commit and answered 0. Usually durable already (its
        fsync was requested when it was written); None once it is."""
        barrier = self._barriers.get(producer_id)
        if barrier is None:
            return None
        state_log, end = barrier
        if state_log.high_watermark >= end or not state_log.config.fsync_before_ack:
            del self._barriers[producer_id]
            return None
        return barrier

    # -- timeouts, expiration, recovery -------------------------------------------------

    async def recover(self, producers: ProducerStateTable) -> None:
        """At start: complete every transaction found in PrepareCommit/PrepareAbort (its
        markers are written again: a partition that already has one gets a second, which
        readers skip); then abort, with the epoch bumped (its producer is fenced and
        starts again; a commit never goes through with records missing), every Ongoing
        transaction unless all of its data partitions were shut down cleanly (Produce
        answers transactional records before their fsync, so after a crash some may be
        gone; kill -9 and power loss cannot be told apart); then end every transaction a
        partition or ``__consumer_offsets`` holds open that the coordinator's state does
        not place there (AddPartitionsToTxn is answered before its record is fsynced, so a
        power loss can lose it): when its producer's transaction is Ongoing, all of it is
        aborted with the epoch bumped (so a commit can never leave that partition out);
        else an ABORT marker is written to those partitions (at the epoch ``producers``
        knows there) and its transactional offsets are dropped."""
        for meta in list(self._txns.values()):
            if meta.in_prepare:
                log.info(
                    "completing transaction of %r found in %s",
                    meta.transactional_id,
                    meta.state.kafka_name,
                )
                await self._guarded(
                    meta.transactional_id,
                    self._complete(meta, commit=meta.state == TxnState.PREPARE_COMMIT),
                )
        strays: dict[int, set[Partition]] = {}
        for topic, partition, pid in self._open_in_logs():
            if not self._holds(pid, (topic, partition)):
                strays.setdefault(pid, set()).add((topic, partition))
        for pid in self._committed.pending_producers():
            if not self._holds(pid, _OFFSETS_PARTITION):
                strays.setdefault(pid, set()).add(_OFFSETS_PARTITION)
        for meta in [m for m in self.all() if m.state == TxnState.ONGOING]:
            parts = strays.pop(meta.producer_id, set())
            if parts:
                log.warning(
                    "aborting producer %d's transaction left open in %s",
                    meta.producer_id,
                    sorted(parts),
                )
            elif shut_down_cleanly(self._topics, meta.partitions - {_OFFSETS_PARTITION}):
                continue
            else:
                log.warning(
                    "aborting the transaction of %r: ongoing at a crash, its records may be lost",
                    meta.transactional_id,
                )
            widened = meta.copy()
            widened.partitions |= parts

            async def abort(widened: TransactionMetadata = widened) -> int:
                await self._fence_and_abort(widened, timed_out=False)
                return _errors.NONE

            await self._guarded(meta.transactional_id, abort())
        for pid, parts in sorted(strays.items()):
            owner = self._by_pid.get(pid)
            log.warning("aborting producer %d's transaction left open in %s", pid, sorted(parts))
            waits = []
            for topic, partition in sorted(parts - {_OFFSETS_PARTITION}):
                epochs = [e for p, e, _s in producers.active(topic, partition) if p == pid]
                epoch = max(epochs, default=owner.producer_epoch if owner is not None else 0)
                waits += write_markers(
                    self._topics, [(topic, partition)], pid, epoch, commit=False,
                    coordinator_epoch=self.coordinator_epoch,
                )  # fmt: skip
            fut, _ = self._committed.complete_txn(pid, commit=False)
            if fut is not None:
                waits.append(asyncio.wrap_future(fut))
            if waits:
                await asyncio.gather(*waits)

    def _holds(self, producer_id: int, partition: Partition) -> bool:
        """Whether the producer's transaction is Ongoing with ``partition`` in it."""
        meta = self._by_pid.get(producer_id)
        return meta is not None and meta.state == TxnState.ONGOING and partition in meta.partitions

    def _open_in_logs(self) -> list[tuple[str, int, int]]:
        """(topic, partition, producer id) of every transaction open in a partition log."""
        found = []
        for name, info in sorted(self._topics.all().items()):
            if name in INTERNAL_TOPICS:
                continue
            for partition in range(info.partitions):
                try:
                    ongoing = self._topics.log(name, partition).ongoing_transactions()
                except SeglogError:  # offline: its transactions are seen when it comes back
                    continue
                found += [(name, partition, pid) for pid in ongoing]
        return found

    async def expire(self, now_ms: int | None = None) -> None:
        """Abort (epoch bumped) every ongoing transaction older than its timeout, and
        forget (tombstone) every id idle in Empty/Complete* for
        ``transactional.id.expiration.ms``."""
        now = _now_ms() if now_ms is None else now_ms
        for meta in list(self._txns.values()):
            txn_id = meta.transactional_id
            if txn_id in self._pending:
                continue
            if meta.in_prepare:  # markers not all written: try again
                commit = meta.state == TxnState.PREPARE_COMMIT
                await self._guarded(txn_id, self._complete(meta, commit))
            elif meta.state == TxnState.ONGOING and now - meta.start_ms > meta.timeout_ms:
                log.info(
                    "aborting the transaction of %r: timed out after %d ms", txn_id, meta.timeout_ms
                )

                async def abort(meta: TransactionMetadata = meta) -> int:
                    await self._fence_and_abort(meta, timed_out=True)
                    return _errors.NONE

                await self._guarded(txn_id, abort())
            elif meta.can_bump and now - meta.last_update_ms > self.expiration_ms:
                log.info("transactional id %r expired", txn_id)

                async def forget(txn_id: str = txn_id) -> int:
                    settle = self._unsettled.get(txn_id)
                    if settle is not None:
                        await asyncio.shield(settle)
                    await self._log.write(txn_id, None)
                    gone = self._txns.pop(txn_id, None)
                    if gone is not None and self._by_pid.get(gone.producer_id) is gone:
                        del self._by_pid[gone.producer_id]
                    return _errors.NONE

                await self._guarded(txn_id, forget())
