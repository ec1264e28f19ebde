"""Idempotent produce: a retried batch gets its original offset; gaps and old epochs are
rejected with Kafka's codes."""

from __future__ import annotations

from kafka.protocol.producer import InitProducerIdRequest

from ._wire import Wire, ensure_topic, fetch_request, make_batch, produce_request, values


def send(w: Wire, topic: str, batch: bytes) -> tuple[int, int]:
    resp = w.call(produce_request(topic, batch))
    part = resp.responses[0].partition_responses[0]
    return int(part.error_code), int(part.base_offset)


def test_duplicate_and_out_of_order(broker: str, topic: str) -> None:
    with Wire(broker) as w:
        ensure_topic(w, topic)
        init = w.call(InitProducerIdRequest[4](transactional_id=None, transaction_timeout_ms=1))
        pid, epoch = init.producer_id, init.producer_epoch

        def batch(seq: int, n: int, ep: int = epoch) -> bytes:
            return make_batch(
                [f"s{seq + i}".encode() for i in range(n)],
                producer_id=pid,
                producer_epoch=ep,
                base_sequence=seq,
            )

        assert send(w, topic, batch(0, 3)) == (0, 0)
        assert send(w, topic, batch(3, 2)) == (0, 3)
        assert send(w, topic, batch(0, 3)) == (0, 0)  # retried: original offset, not stored
        assert send(w, topic, batch(3, 2)) == (0, 3)
        assert send(w, topic, batch(9, 1)) == (45, -1)  # OUT_OF_ORDER_SEQUENCE_NUMBER
        assert send(w, topic, batch(5, 1)) == (0, 5)
        assert send(w, topic, batch(0, 1, ep=epoch + 1)) == (0, 6)  # new epoch restarts
        assert send(w, topic, batch(6, 1)) == (47, -1)  # INVALID_PRODUCER_EPOCH (old epoch)
        resp = w.call(fetch_request(topic, {0: 0}))
    stored = values(resp.responses[0].partitions[0].records)
    assert stored == [b"s0", b"s1", b"s2", b"s3", b"s4", b"s5", b"s0"]


def test_new_epoch_must_start_at_sequence_zero(broker: str, topic: str) -> None:
    """Kafka: a batch of a higher epoch than the partition's producer state must start a
    new sequence (0); anything else is 45 OUT_OF_ORDER_SEQUENCE_NUMBER, not stored."""
    with Wire(broker) as w:
        ensure_topic(w, topic)
        init = w.call(InitProducerIdRequest[4](transactional_id=None, transaction_timeout_ms=1))
        pid, epoch = init.producer_id, init.producer_epoch

        def batch(seq: int, ep: int) -> bytes:
            return make_batch(
                [f"e{ep}s{seq}".encode()], producer_id=pid, producer_epoch=ep, base_sequence=seq
            )

        assert send(w, topic, batch(0, epoch)) == (0, 0)
        assert send(w, topic, batch(1, epoch)) == (0, 1)
        assert send(w, topic, batch(5, epoch + 1)) == (45, -1)
        assert send(w, topic, batch(2, epoch)) == (0, 2)  # the old epoch is still current
        assert send(w, topic, batch(0, epoch + 1)) == (0, 3)
        resp = w.call(fetch_request(topic, {0: 0}))
    stored = values(resp.responses[0].partitions[0].records)
    assert stored == [b"e0s0", b"e0s1", b"e0s2", b"e1s0"]
