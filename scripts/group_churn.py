"""Consumer-group churn against a real ``seglog serve``: members (separate processes,
confluent-kafka, half of them static) join, consume, commit, leave or are killed with
SIGKILL, while a producer keeps writing and the broker itself is killed with SIGKILL and
restarted every ``--broker-kill-s`` seconds. Meanwhile the group's committed offsets are
sampled: no committed offset may ever go backwards (not across a broker kill either), and
at the end every acknowledged record is still in the log.

    .venv/bin/python scripts/group_churn.py --seconds 600      # the 10-minute run
    (tests/broker/test_group_churn.py runs 25 s of it in CI)
"""

from __future__ import annotations

import argparse
import random
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from confluent_kafka import ConsumerGroupTopicPartitions, Producer
from confluent_kafka.admin import AdminClient, NewTopic

from seglog.broker import BrokerProcess, free_port, start_broker
from seglog.storage import open_log

TOPIC, GROUP, PARTITIONS = "churn", "churners", 4

MEMBER = """
import sys
from confluent_kafka import Consumer
bootstrap, instance = sys.argv[1], sys.argv[2]
conf = {"bootstrap.servers": bootstrap, "group.id": "churners", "enable.auto.commit": False,
        "auto.offset.reset": "earliest", "session.timeout.ms": 6000, "log_level": 0}
if instance != "-":
    conf["group.instance.id"] = instance
c = Consumer(conf)
c.subscribe(["churn"])
while True:
    msgs = c.consume(200, 0.5)
    good = [m for m in msgs if m.error() is None]
    if good:
        try:
            c.commit(message=good[-1], asynchronous=False)
        except Exception:
            pass  # the broker is being restarted: the next commit covers these
"""


class Churn:
    """The run's state: the broker, the members, what was acknowledged and observed."""

    def __init__(self, work: Path, seed: int) -> None:
        self.work = work
        self.rng = random.Random(seed)
        self.port = free_port()
        self.broker: BrokerProcess = start_broker(work / "data", port=self.port)
        self.bootstrap = self.broker.bootstrap
        admin = AdminClient({"bootstrap.servers": self.bootstrap})
        admin.create_topics([NewTopic(TOPIC, PARTITIONS)])[TOPIC].result(30)
        self.members: list[subprocess.Popen[bytes]] = []
        self.acknowledged = 0
        self.highest: dict[int, int] = {}
        self.backwards: list[str] = []
        self.stop = threading.Event()
        self.broker_kills = self.member_kills = self.member_starts = 0

    def produce(self) -> None:
        producer = Producer(
            {
                "bootstrap.servers": self.bootstrap,
                "acks": "all",
                "log_level": 0,
                "message.timeout.ms": 60000,
            }
        )

        def delivered(err: object, _msg: object) -> None:
            if err is None:
                self.acknowledged += 1

        while not self.stop.is_set():
            for _ in range(50):
                producer.produce(TOPIC, value=b"x" * 64, on_delivery=delivered)
            producer.poll(0.05)
        producer.flush(60)

    def sample(self) -> None:
        admin = AdminClient({"bootstrap.servers": self.bootstrap, "log_level": 0})
        while not self.stop.is_set():
            try:
                futures = admin.list_consumer_group_offsets([ConsumerGroupTopicPartitions(GROUP)])
                result = futures[GROUP].result(5)
            except Exception:  # the broker is down right now
                self.stop.wait(0.2)
                continue
            for tp in result.topic_partitions:
                if tp.offset < 0:
                    continue
                before = self.highest.get(tp.partition, -1)
                if tp.offset < before:
                    self.backwards.append(f"partition {tp.partition}: {before} -> {tp.offset}")
                self.highest[tp.partition] = max(before, tp.offset)
            self.stop.wait(0.2)

    def start_member(self) -> None:
        instance = f"static-{self.rng.randrange(4)}" if self.rng.random() < 0.5 else "-"
        if instance != "-" and any(getattr(m, "instance", None) == instance for m in self.members):
            instance = "-"
        proc = subprocess.Popen(
            [sys.executable, "-c", MEMBER, self.bootstrap, instance],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        proc.instance = instance  # type: ignore[attr-defined]
        self.members.append(proc)
        self.member_starts += 1

    def churn_members(self) -> None:
        live = [m for m in self.members if m.poll() is None]
        self.members = live
        if len(live) < 2 or (len(live) < 5 and self.rng.random() < 0.6):
            self.start_member()
        elif live:
            victim = self.rng.choice(live)
            victim.send_signal(signal.SIGKILL if self.rng.random() < 0.5 else signal.SIGTERM)
            victim.wait(30)
            self.member_kills += 1

    def kill_broker(self) -> None:
        self.broker.process.send_signal(signal.SIGKILL)
        self.broker.process.wait(30)
        self.broker.returncode = 0
        self.broker = start_broker(self.work / "data", port=self.port)
        self.broker_kills += 1

    def finish(self) -> None:
        self.stop.set()
        for m in self.members:
            m.send_signal(signal.SIGKILL)
            m.wait(30)
        self.broker.stop()


def run(seconds: float, broker_kill_s: float, seed: int = 1) -> dict[str, object]:
    """Churn for ``seconds``; returns the figures (raises AssertionError on a violation)."""
    with tempfile.TemporaryDirectory() as tmp:
        churn = Churn(Path(tmp), seed)
        threads = [threading.Thread(target=churn.produce), threading.Thread(target=churn.sample)]
        for t in threads:
            t.start()
        started = last_kill = time.monotonic()
        try:
            while time.monotonic() - started < seconds:
                churn.churn_members()
                if time.monotonic() - last_kill > broker_kill_s:
                    churn.kill_broker()
                    last_kill = time.monotonic()
                churn.stop.wait(churn.rng.uniform(0.3, 1.5))
        finally:
            churn.finish()
            for t in threads:
                t.join(120)
        stored = 0
        for p in range(PARTITIONS):
            with open_log(Path(tmp) / "data" / f"{TOPIC}-{p}", read_only=True) as plog:
                stored += plog.next_offset() - plog.log_start_offset
        figures = {
            "seconds": seconds,
            "acknowledged": churn.acknowledged,
            "stored": stored,
            "broker_kills": churn.broker_kills,
            "member_starts": churn.member_starts,
            "member_kills": churn.member_kills,
            "committed": dict(sorted(churn.highest.items())),
            "backwards": churn.backwards,
        }
    assert not figures["backwards"], figures
    assert stored >= churn.acknowledged, figures  # nothing acknowledged was lost
    return figures


def main() -> None:
    """Run from the command line and print the figures."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=600)
    parser.add_argument("--broker-kill-s", type=float, default=30)
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    print(run(args.seconds, args.broker_kill_s, args.seed))


if __name__ == "__main__":
    main()
