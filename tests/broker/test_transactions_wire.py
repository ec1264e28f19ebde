"""Transactions on the wire, request by request (KIP-98/360/588/890): the coordinator's
answers, Kafka's error codes for bad input (with nothing stored damaged), read_committed
Fetch and ListOffsets, the admin APIs."""

from __future__ import annotations

from kafka.protocol.admin import (
    DescribeProducersRequest,
    DescribeTransactionsRequest,
    ListTransactionsRequest,
)
from kafka.protocol.consumer import OffsetFetchRequest
from kafka.protocol.metadata import FindCoordinatorRequest
from kafka.protocol.producer import (
    AddOffsetsToTxnRequest,
    AddPartitionsToTxnRequest,
    TxnOffsetCommitRequest,
    WriteTxnMarkersRequest,
)
from tests._wait import wait_until

from ._txn import (
    CONCURRENT_TRANSACTIONS,
    INVALID_PRODUCER_EPOCH,
    INVALID_PRODUCER_ID_MAPPING,
    INVALID_TRANSACTION_TIMEOUT,
    INVALID_TXN_STATE,
    PRODUCER_FENCED,
    add,
    end,
    fetch,
    init,
    latest,
    send,
    stored_values,
    txn_batch,
)
from ._wire import Wire, api_versions, ensure_topic

BROKER_ARGS = ("--transaction-max-timeout-ms", "60000")


def test_versions_advertised(broker: str) -> None:
    versions = api_versions(broker)
    assert versions[22] == (0, 5)  # InitProducerId
    assert versions[24] == (0, 5)  # AddPartitionsToTxn
    assert versions[25] == (0, 4)  # AddOffsetsToTxn
    assert versions[26] == (0, 4)  # EndTxn
    assert versions[27] == (0, 1)  # WriteTxnMarkers
    assert versions[28] == (0, 4)  # TxnOffsetCommit
    assert versions[65] == (0, 0)  # DescribeTransactions
    assert versions[66] == (0, 2)  # ListTransactions


def test_find_coordinator_transaction(broker: str) -> None:
    with Wire(broker) as w:
        resp = w.call(FindCoordinatorRequest[3](key="tx", key_type=1))
        assert resp.error_code == 0
        assert resp.node_id >= 0
        resp = w.call(FindCoordinatorRequest[4](key_type=1, coordinator_keys=["a", "b"]))
        assert [c.error_code for c in resp.coordinators] == [0, 0]
        resp = w.call(FindCoordinatorRequest[3](key="x", key_type=7))
        assert resp.error_code == 42  # INVALID_REQUEST


def test_commit_abort_read_committed(broker: str, topic: str) -> None:
    """A committed transaction is visible to read_committed, an aborted one is listed in
    aborted_transactions, an open one holds the last stable offset back."""
    with Wire(broker) as w:
        ensure_topic(w, topic)
        r = init(w, "wire-1")
        assert r.error_code == 0
        assert r.producer_epoch == 0
        pid, epoch = r.producer_id, r.producer_epoch
        assert add(w, "wire-1", pid, epoch, topic) == 0
        assert send(w, topic, txn_batch(pid, epoch, 0, [b"c1", b"c2"])) == 0
        assert end(w, "wire-1", pid, epoch, True) == 0  # offsets 0-1, marker 2
        assert add(w, "wire-1", pid, epoch, topic) == 0
        assert send(w, topic, txn_batch(pid, epoch, 2, [b"a1"])) == 0
        assert end(w, "wire-1", pid, epoch, False) == 0  # offset 3, marker 4
        assert add(w, "wire-1", pid, epoch, topic) == 0
        assert send(w, topic, txn_batch(pid, epoch, 3, [b"o1"])) == 0  # offset 5: open
        # answered before its fsync: the high watermark follows once it is durable
        wait_until(lambda: latest(w, topic, 0) == 6, message="offset 5 never durable")
        committed = fetch(w, topic, 1)
        assert committed.high_watermark == 6
        assert committed.last_stable_offset == 5
        assert [(a.producer_id, a.first_offset) for a in committed.aborted_transactions] == [
            (pid, 3)
        ]
        assert stored_values(committed.records) == [b"c1", b"c2", b"a1"]  # a1: client filters
        uncommitted = fetch(w, topic, 0)
        assert uncommitted.aborted_transactions is None
        assert stored_values(uncommitted.records) == [b"c1", b"c2", b"a1", b"o1"]
        assert latest(w, topic, 1) == 5
        assert latest(w, topic, 0) == 6
        described = w.call(DescribeProducersRequest[0](topics=[
            DescribeProducersRequest.TopicRequest(name=topic, partition_indexes=[0])
        ]))  # fmt: skip
        state = described.topics[0].partitions[0].active_producers[0]
        assert (state.producer_id, state.current_txn_start_offset) == (pid, 5)
        assert end(w, "wire-1", pid, epoch, True) == 0
        # the records are readable at once; the marker itself (offset 6) once fsynced
        assert stored_values(fetch(w, topic, 1).records) == [b"c1", b"c2", b"a1", b"o1"]
        wait_until(lambda: latest(w, topic, 1) == 7, message="the marker is not durable")


def test_fencing_and_bad_input(broker: str, topic: str) -> None:
    """Stale epoch, EndTxn without a transaction, produce outside the transaction, a
    timeout above the maximum: Kafka's codes, and the partition keeps what it had."""
    with Wire(broker) as w:
        ensure_topic(w, topic)
        assert init(w, "wire-bad", timeout_ms=60_001).error_code == INVALID_TRANSACTION_TIMEOUT
        assert init(w, "wire-bad", timeout_ms=0).error_code == INVALID_TRANSACTION_TIMEOUT
        assert init(w, "", timeout_ms=1000).error_code == 42
        first = init(w, "wire-bad")
        pid, old = first.producer_id, first.producer_epoch
        assert end(w, "wire-bad", pid, old, True) == INVALID_TXN_STATE  # no transaction
        # produce outside the transaction: not added yet
        assert send(w, topic, txn_batch(pid, old, 0, [b"x"])) == INVALID_TXN_STATE
        assert add(w, "wire-bad", pid, old, topic) == 0
        assert send(w, topic, txn_batch(pid, old, 0, [b"ok"])) == 0
        # a second producer with the same id fences the first: its transaction is aborted
        fence = init(w, "wire-bad")
        assert fence.error_code == CONCURRENT_TRANSACTIONS
        second = init(w, "wire-bad")
        assert second.error_code == 0
        assert second.producer_id == pid
        new = second.producer_epoch
        assert new == old + 2  # one bump to fence and abort, one for the new producer
        assert send(w, topic, txn_batch(pid, old, 1, [b"zombie"])) == INVALID_PRODUCER_EPOCH
        assert add(w, "wire-bad", pid, old, topic, version=3) == PRODUCER_FENCED
        assert add(w, "wire-bad", pid, old, topic, version=1) == INVALID_PRODUCER_EPOCH
        assert end(w, "wire-bad", pid, old, True, version=3) == PRODUCER_FENCED
        assert end(w, "wire-bad", pid, old, True, version=1) == INVALID_PRODUCER_EPOCH
        assert end(w, "wire-bad", pid + 1000, new, True) == INVALID_PRODUCER_ID_MAPPING
        stale = init(w, "wire-bad", version=4, producer_id=pid, producer_epoch=old)
        assert stale.error_code == PRODUCER_FENCED
        stale = init(w, "wire-bad", version=3, producer_id=pid, producer_epoch=old)
        assert stale.error_code == INVALID_PRODUCER_EPOCH
        # KIP-360: the current producer may ask for a bump with its own id and epoch
        bumped = init(w, "wire-bad", version=4, producer_id=pid, producer_epoch=new)
        assert (bumped.error_code, bumped.producer_epoch) == (0, new + 1)
        part = fetch(w, topic, 0)
        assert stored_values(part.records) == [b"ok"]  # and the abort marker
        assert fetch(w, topic, 1).aborted_transactions[0].first_offset == 0
        assert stored_values(fetch(w, topic, 1).records) == [b"ok"]
        assert latest(w, topic, 1) == 2


def test_txn_offset_commit_visible_on_commit(broker: str, topic: str) -> None:
    def committed(w: Wire, group: str) -> int:
        req = OffsetFetchRequest[7]
        resp = w.call(req(group_id=group, topics=None, require_stable=False))
        for t in resp.topics:
            for p in t.partitions:
                if t.name == topic:
                    return int(p.committed_offset)
        return -1

    with Wire(broker) as w:
        ensure_topic(w, topic)
        r = init(w, "wire-off")
        pid, epoch = r.producer_id, r.producer_epoch
        req = TxnOffsetCommitRequest[3]
        commit = req(
            transactional_id="wire-off", group_id="g-off", producer_id=pid, producer_epoch=epoch,
            generation_id=-1, member_id="", group_instance_id=None,
            topics=[req.TxnOffsetCommitRequestTopic(name=topic, partitions=[
                req.TxnOffsetCommitRequestTopic.TxnOffsetCommitRequestPartition(
                    partition_index=0, committed_offset=42, committed_leader_epoch=-1,
                    committed_metadata="m",
                )
            ])],
        )  # fmt: skip
        code = w.call(commit).topics[0].partitions[0].error_code
        assert code == INVALID_TXN_STATE  # no AddOffsetsToTxn yet
        stranger = req(
            transactional_id="wire-off", group_id="g-off", producer_id=pid, producer_epoch=epoch,
            generation_id=3, member_id="nobody", group_instance_id=None, topics=commit.topics,
        )  # fmt: skip
        add_offsets = AddOffsetsToTxnRequest[3](
            transactional_id="wire-off", producer_id=pid, producer_epoch=epoch, group_id="g-off"
        )
        assert w.call(add_offsets).error_code == 0
        # KIP-447: a member's generation is checked (the group has no such generation)
        assert w.call(stranger).topics[0].partitions[0].error_code == 22  # ILLEGAL_GENERATION
        assert w.call(commit).topics[0].partitions[0].error_code == 0
        assert committed(w, "g-off") == -1  # pending until the transaction commits
        fetch_req = OffsetFetchRequest[7]
        wanted = fetch_req.OffsetFetchRequestTopic(name=topic, partition_indexes=[0])
        stable = w.call(fetch_req(group_id="g-off", topics=[wanted], require_stable=True))
        assert stable.topics[0].partitions[0].error_code == 88  # UNSTABLE_OFFSET_COMMIT
        assert end(w, "wire-off", pid, epoch, False) == 0
        assert committed(w, "g-off") == -1  # aborted: never visible
        assert w.call(add_offsets).error_code == 0
        assert w.call(commit).topics[0].partitions[0].error_code == 0
        assert end(w, "wire-off", pid, epoch, True) == 0
        assert committed(w, "g-off") == 42


def test_describe_and_list_transactions(broker: str, topic: str) -> None:
    with Wire(broker) as w:
        ensure_topic(w, topic)
        r = init(w, "wire-desc", timeout_ms=45_000)
        pid, epoch = r.producer_id, r.producer_epoch
        assert add(w, "wire-desc", pid, epoch, topic) == 0
        d = w.call(DescribeTransactionsRequest[0](transactional_ids=["wire-desc", "nope"]))
        state, missing = d.transaction_states
        assert (state.error_code, state.transaction_state) == (0, "Ongoing")
        assert (state.producer_id, state.producer_epoch, state.transaction_timeout_ms) == (
            pid, epoch, 45_000,
        )  # fmt: skip
        assert state.transaction_start_time_ms > 0
        assert [(t.topic, list(t.partitions)) for t in state.topics] == [(topic, [0])]
        assert missing.error_code == 105  # TRANSACTIONAL_ID_NOT_FOUND
        listed = w.call(ListTransactionsRequest[1](
            state_filters=["Ongoing", "Bogus"], producer_id_filters=[], duration_filter=-1
        ))  # fmt: skip
        assert "wire-desc" in {t.transactional_id for t in listed.transaction_states}
        assert list(listed.unknown_state_filters) == ["Bogus"]
        assert {t.transaction_state for t in listed.transaction_states} == {"Ongoing"}
        by_pid = w.call(ListTransactionsRequest[2](
            state_filters=[], producer_id_filters=[pid], duration_filter=-1,
            transactional_id_pattern="^wire-d",
        ))  # fmt: skip
        assert [t.transactional_id for t in by_pid.transaction_states] == ["wire-desc"]
        long_running = w.call(ListTransactionsRequest[1](
            state_filters=[], producer_id_filters=[], duration_filter=3_600_000
        ))  # fmt: skip
        assert long_running.transaction_states == []
        assert end(w, "wire-desc", pid, epoch, False) == 0
        d = w.call(DescribeTransactionsRequest[0](transactional_ids=["wire-desc"]))
        assert d.transaction_states[0].transaction_state == "CompleteAbort"


def test_add_partitions_v4_verify_only_and_write_markers(broker: str, topic: str) -> None:
    with Wire(broker) as w:
        ensure_topic(w, topic)
        r = init(w, "wire-v4")
        pid, epoch = r.producer_id, r.producer_epoch
        req = AddPartitionsToTxnRequest[4]

        def batched(verify_only: bool) -> int:
            txn = req.AddPartitionsToTxnTransaction(
                transactional_id="wire-v4", producer_id=pid, producer_epoch=epoch,
                verify_only=verify_only,
                topics=[req.AddPartitionsToTxnTransaction.AddPartitionsToTxnTopic(
                    name=topic, partitions=[0])],
            )  # fmt: skip
            resp = w.call(req(transactions=[txn]))
            assert resp.error_code == 0
            result = resp.results_by_transaction[0].topic_results[0].results_by_partition[0]
            return int(result.partition_error_code)

        assert batched(True) == INVALID_TXN_STATE  # not in a transaction yet
        assert batched(False) == 0
        assert batched(True) == 0
        assert send(w, topic, txn_batch(pid, epoch, 0, [b"hang"])) == 0
        assert latest(w, topic, 1) == 0
        # what `seglog transactions abort` sends for a hanging transaction
        mreq = WriteTxnMarkersRequest[1]
        marker = mreq.WritableTxnMarker(
            producer_id=pid, producer_epoch=epoch, transaction_result=False,
            topics=[mreq.WritableTxnMarker.WritableTxnMarkerTopic(
                name=topic, partition_indexes=[0])],
            coordinator_epoch=0,
        )  # fmt: skip
        resp = w.call(mreq(markers=[marker]))
        assert resp.markers[0].topics[0].partitions[0].error_code == 0
        assert latest(w, topic, 1) == 2
        assert fetch(w, topic, 1).aborted_transactions[0].first_offset == 0
