"""Idempotent-producer state survives a restart: a batch retried after a clean stop or a
kill -9 gets its original offset and is stored once; the next sequence is accepted, a gap
is 45, an old epoch 47 (the state is rebuilt from the snapshot and the log tail)."""

from __future__ import annotations

import signal
from collections.abc import Callable

import pytest
from kafka.protocol.producer import InitProducerIdRequest

from seglog.broker import BrokerProcess

from ._wire import Wire, ensure_topic, fetch_request, make_batch, produce_request, values


def _send(w: Wire, topic: str, batch: bytes) -> tuple[int, int]:
    resp = w.call(produce_request(topic, batch))
    part = resp.responses[0].partition_responses[0]
    return int(part.error_code), int(part.base_offset)


@pytest.mark.parametrize("stop_signal", [signal.SIGTERM, signal.SIGKILL], ids=["clean", "kill9"])
def test_retry_after_restart_is_not_stored_twice(
    broker_factory: Callable[..., BrokerProcess], stop_signal: int
) -> None:
    topic = "retried"
    proc = broker_factory()
    with Wire(proc.bootstrap) as w:
        ensure_topic(w, topic)
        init = w.call(InitProducerIdRequest[4](transactional_id=None, transaction_timeout_ms=1))
        pid, epoch = init.producer_id, init.producer_epoch

        def batch(seq: int, n: int) -> bytes:
            return make_batch(
                [f"s{seq + i}".encode() for i in range(n)],
                producer_id=pid,
                producer_epoch=epoch,
                base_sequence=seq,
            )

        assert _send(w, topic, batch(0, 3)) == (0, 0)
        assert _send(w, topic, batch(3, 2)) == (0, 3)
    proc.process.send_signal(stop_signal)
    proc.process.wait(30)
    proc.returncode = 0  # stopped on purpose (SIGKILL included)

    again = broker_factory(data=proc.data_dir)
    with Wire(again.bootstrap) as w:
        assert _send(w, topic, batch(0, 3)) == (0, 0)  # the retry: original offsets
        assert _send(w, topic, batch(3, 2)) == (0, 3)
        assert _send(w, topic, batch(9, 1)) == (45, -1)  # a gap after the restart
        assert _send(w, topic, batch(5, 1)) == (0, 5)  # the next sequence
        resp = w.call(fetch_request(topic, {0: 0}))
        # a new producer id is never one the logs already hold
        init2 = w.call(InitProducerIdRequest[4](transactional_id=None, transaction_timeout_ms=1))
        assert init2.producer_id != pid
    stored = values(resp.responses[0].partitions[0].records)
    assert stored == [b"s0", b"s1", b"s2", b"s3", b"s4", b"s5"]  # [a,b,c,a,b,c] no more


def test_epoch_fencing_survives_a_restart(broker_factory: Callable[..., BrokerProcess]) -> None:
    topic = "fenced"
    proc = broker_factory()
    with Wire(proc.bootstrap) as w:
        ensure_topic(w, topic)
        init = w.call(InitProducerIdRequest[4](transactional_id=None, transaction_timeout_ms=1))
        pid = init.producer_id
        newer = make_batch([b"new"], producer_id=pid, producer_epoch=3, base_sequence=0)
        assert _send(w, topic, newer) == (0, 0)
    assert proc.stop() == 0
    assert (proc.data_dir / "producer-state.json").exists()  # the clean-stop snapshot
    again = broker_factory(data=proc.data_dir)
    with Wire(again.bootstrap) as w:
        older = make_batch([b"old"], producer_id=pid, producer_epoch=2, base_sequence=1)
        assert _send(w, topic, older) == (47, -1)  # INVALID_PRODUCER_EPOCH, as before
