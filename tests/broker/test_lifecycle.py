"""Broker lifecycle: clean SIGTERM/SIGINT exit (with a long poll in flight), data and
producer ids surviving restarts, the data directory's writer lock."""

from __future__ import annotations

import signal
import subprocess
import sys
import threading
from collections.abc import Callable
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from kafka.protocol.producer import InitProducerIdRequest
from tests._wait import wait_until

from seglog.broker import BrokerProcess, free_port

from ._observe import METRICS_ARGS, metrics_port, wait_fetches_waiting
from ._wire import Wire, ensure_topic, fetch_request, produce, values


def test_data_persists_across_restart(broker_factory: Callable[..., BrokerProcess]) -> None:
    first = broker_factory()
    producer = Producer({"bootstrap.servers": first.bootstrap, "compression.type": "zstd"})
    for i in range(100):
        producer.produce("events", key=b"k%d" % i, value=b"v%d" % i)
    assert producer.flush(20) == 0
    assert first.stop() == 0
    second = broker_factory()
    consumer = Consumer({"bootstrap.servers": second.bootstrap, "group.id": "restart"})
    try:
        consumer.assign([TopicPartition("events", 0, 0)])
        got = []

        def poll_once() -> bool:
            msg = consumer.poll(0.5)
            if msg is not None and msg.error() is None:
                got.append((msg.offset(), msg.key(), msg.value()))
            return len(got) >= 100

        wait_until(poll_once, timeout=20, interval=0, message=lambda: f"{len(got)} of 100")
    finally:
        consumer.close()
    assert got == [(i, b"k%d" % i, b"v%d" % i) for i in range(100)]


def test_producer_ids_unique_across_restart(
    broker_factory: Callable[..., BrokerProcess],
) -> None:
    def init(bootstrap: str) -> int:
        with Wire(bootstrap) as w:
            resp = w.call(InitProducerIdRequest[4](transactional_id=None, transaction_timeout_ms=1))
        assert resp.error_code == 0
        return int(resp.producer_id)

    first = broker_factory()
    ids = [init(first.bootstrap) for _ in range(3)]
    assert first.stop() == 0
    second = broker_factory()
    later = init(second.bootstrap)
    assert later > max(ids)
    assert ids == sorted(set(ids))


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_signal_answers_long_poll_and_exits_0(
    broker_factory: Callable[..., BrokerProcess], sig: int
) -> None:
    proc = broker_factory(METRICS_ARGS)
    port = metrics_port(proc)
    with Wire(proc.bootstrap, timeout=30) as w:
        ensure_topic(w, "t")
        produce(w, "t", [b"kept"])
        w.send(fetch_request("t", {0: 1}, max_wait_ms=60_000))
        wait_fetches_waiting(port, 1)  # the fetch is parked in its long poll
        stopper = threading.Thread(target=proc.stop, args=(sig,))
        stopper.start()
        frame = w.recv_frame()  # answered at shutdown, not after 60 s
        stopper.join()
    assert len(frame) > 8
    assert proc.returncode == 0
    log = proc.log_text()
    assert "listening on 127.0.0.1:" in log
    assert "stopped" in log
    assert "Traceback" not in log


def test_second_broker_on_same_data_dir_fails(
    broker_factory: Callable[..., BrokerProcess], tmp_path: Path
) -> None:
    broker_factory()
    result = subprocess.run(
        [
            str(Path(sys.executable).with_name("seglog")),
            "serve",
            "--data-dir",
            str(tmp_path / "data"),
            "--listen",
            f"127.0.0.1:{free_port()}",
        ],
        capture_output=True,
        timeout=30,
        check=False,
    )
    assert result.returncode == 2
    assert b"locked" in result.stderr


def test_restart_keeps_stored_bytes_and_offsets(
    broker_factory: Callable[..., BrokerProcess],
) -> None:
    first = broker_factory()
    with Wire(first.bootstrap) as w:
        ensure_topic(w, "keep")
        for i in range(3):
            produce(w, "keep", [b"b%d" % i])
    assert first.stop() == 0
    second = broker_factory()
    with Wire(second.bootstrap) as w:
        resp = w.call(fetch_request("keep", {0: 0}))
        assert produce(w, "keep", [b"next"]) == 3
    assert values(resp.responses[0].partitions[0].records) == [b"b0", b"b1", b"b2"]


def test_flags_segment_roll_and_relaxed_flush(
    broker_factory: Callable[..., BrokerProcess],
) -> None:
    proc = broker_factory(["--log-segment-bytes", "4096", "--log-flush-interval-messages", "10"])
    with Wire(proc.bootstrap) as w:
        ensure_topic(w, "rolled")
        for i in range(40):
            assert produce(w, "rolled", [b"%03d" % i + b"." * 200]) == i
        got: list[bytes] = []
        while len(got) < 40:  # a fetch returns data from one segment at most, as in Kafka
            resp = w.call(fetch_request("rolled", {0: len(got)}, max_bytes=1 << 20))
            more = values(resp.responses[0].partitions[0].records)
            assert more
            got.extend(more)
    assert got == [b"%03d" % i + b"." * 200 for i in range(40)]
    assert len(list((proc.data_dir / "rolled-0").glob("*.log"))) > 1


def test_port_in_use_exits_2(broker_process: BrokerProcess, tmp_path: Path) -> None:
    result = subprocess.run(
        [
            str(Path(sys.executable).with_name("seglog")),
            "serve",
            "--data-dir",
            str(tmp_path / "other"),
            "--listen",
            broker_process.bootstrap,
        ],
        capture_output=True,
        timeout=30,
        check=False,
    )
    assert result.returncode == 2
    assert b"address already in use" in result.stderr.lower()


def test_event_loop_is_uvloop_unless_asked_for_asyncio(
    broker_factory: Callable[..., BrokerProcess], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The docs' claim (docs/broker.md): uvloop runs the broker when installed (a dependency
    on Linux); SEGLOG_EVENT_LOOP=asyncio selects asyncio's own loop, and both serve
    clients."""
    for env, expected in ((None, "uvloop"), ("asyncio", "asyncio")):
        if env is None:
            monkeypatch.delenv("SEGLOG_EVENT_LOOP", raising=False)
        else:
            monkeypatch.setenv("SEGLOG_EVENT_LOOP", env)
        broker = broker_factory()
        with Wire(broker.bootstrap) as w:
            ensure_topic(w, "loop")
            produce(w, "loop", [b"x"])
        assert f"event loop: {expected}" in broker.log_text()
        assert broker.stop() == 0
