"""Today's group protocols against one ``seglog serve``, each next to the classic protocol
measured in the same run (confluent-kafka / librdkafka clients):

- **rebalance of N members** (default 10) on a topic of 2N partitions that a background
  producer writes to steadily (one 100 B record per partition every 10 ms): N - 1 members
  consume, the N-th joins, then one of the first leaves (``close()``). For each change,
  seen from the clients: the time until every partition is owned by exactly one member
  and the assignment is balanced (the last ``on_assign`` / ``on_revoke`` of any member),
  and the time until every partition has been consumed again by its owner (for a partition
  that moved, its first record after the owner's ``on_assign``). KIP-848
  (``group.protocol=consumer``, the broker's ``uniform`` assignor) against classic
  (``group.protocol=classic``) with ``range`` (eager, librdkafka's default) and with
  ``cooperative-sticky``. Heartbeat interval and session timeout are equal for both: the
  broker's ``group.consumer.*`` settings, the classic clients' ``heartbeat.interval.ms`` /
  ``session.timeout.ms``. Goal: KIP-848 <= 0.5x classic.

  Members hear of a change at their next heartbeat, so a change's time depends on where
  it falls in the members' heartbeat cycle (their heartbeats keep the phase of the last
  rebalance). ``--phase spread`` (the default) starts the join and the leave of repeat
  ``r`` of ``R`` ``(r + 0.5) / R`` heartbeat intervals after the group settled, the same
  offsets for every protocol, so the medians cover the whole cycle; ``--phase settled``
  starts them as soon as the group is seen settled (one fixed phase: the last callback
  plus ``QUIET_S``).
- **share-group delivery**: N records (default 200,000 x 100 B) on a 1-partition topic,
  read by 4 ``ShareConsumer`` s of one share group (implicit acknowledgement, every record
  counted once) against one classic consumer (auto commit) reading the same records.
  Goal: >= 0.5x.

Prints a markdown table of medians over ``--repeat`` runs; ``--json FILE`` writes it, the
settings and every sample.

    .venv/bin/python benchmarks/group_protocols_bench.py             # 3 repeats, medians
    .venv/bin/python benchmarks/group_protocols_bench.py --records 2000 --members 3 --repeat 1
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from confluent_kafka import Consumer, KafkaException, Producer, ShareConsumer, TopicPartition
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    NewTopic,
    ResourceType,
)

from seglog.broker import start_broker

PROTOCOLS = ("consumer", "classic-range", "classic-cooperative")
CLASSIC = {
    "classic-range": "classic, range (eager)",
    "classic-cooperative": "classic, cooperative-sticky",
}
INITIAL_REBALANCE_DELAY_MS = 100
QUIET_S = 1.0
"""A settled assignment must stay unchanged this long (no callback on any member)."""
TIMEOUT_S = 60.0
REBALANCE_TOPIC = "rebalance"


def _log(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


# -- rebalance ---------------------------------------------------------------------------


def _member_conf(
    bootstrap: str, group: str, protocol: str, heartbeat_ms: int, session_ms: int
) -> dict[str, Any]:
    base = {
        "bootstrap.servers": bootstrap,
        "group.id": group,
        "auto.offset.reset": "latest",
        "enable.auto.commit": True,
    }
    if protocol == "consumer":  # heartbeat and session: the broker's settings
        return {**base, "group.protocol": "consumer"}
    strategy = "range" if protocol == "classic-range" else "cooperative-sticky"
    return {
        **base,
        "group.protocol": "classic",
        "partition.assignment.strategy": strategy,
        "heartbeat.interval.ms": heartbeat_ms,
        "session.timeout.ms": session_ms,
    }


class Member:
    """One consumer polled by its own thread. Its assignment is kept from the callbacks
    (eager: whole sets; cooperative and KIP-848: increments), with the time of the last
    callback that moved a partition and, per owned partition, the first consumption since
    both the last :meth:`mark` and the partition's ``on_assign``."""

    def __init__(self, conf: dict[str, Any], topic: str) -> None:
        self.lock = threading.Lock()
        self.owned: set[int] = set()
        self.resumed: dict[int, float] = {}
        self.last_change = 0.0
        self.errors: list[str] = []
        self._stop = threading.Event()
        self._close_on_stop = False
        self.consumer = Consumer(conf)
        self.consumer.subscribe(
            [topic], on_assign=self._assign, on_revoke=self._revoke, on_lost=self._revoke
        )
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _assign(self, _consumer: Any, parts: list[TopicPartition]) -> None:
        now = time.perf_counter()
        with self.lock:
            for tp in parts:
                self.owned.add(tp.partition)
                self.resumed.pop(tp.partition, None)
            if parts:  # empty callbacks (classic: every member, every round) change nothing
                self.last_change = now

    def _revoke(self, _consumer: Any, parts: list[TopicPartition]) -> None:
        now = time.perf_counter()
        with self.lock:
            for tp in parts:
                self.owned.discard(tp.partition)
                self.resumed.pop(tp.partition, None)
            if parts:
                self.last_change = now

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                msgs = self.consumer.consume(1000, 0.05)
            except KafkaException as exc:
                self.errors.append(str(exc))
                continue
            now = time.perf_counter()
            with self.lock:
                for m in msgs:
                    p = m.partition()
                    if m.error() is None and p in self.owned and p not in self.resumed:
                        self.resumed[p] = now
        if self._close_on_stop:
            self.consumer.close()

    def mark(self) -> None:
        """Forget earlier consumption: only what follows counts as resumed."""
        with self.lock:
            self.resumed.clear()

    def snapshot(self) -> tuple[set[int], dict[int, float], float]:
        with self.lock:
            return set(self.owned), dict(self.resumed), self.last_change

    def pause(self) -> None:
        """Stop polling (the consumer stays in the group: librdkafka heartbeats on its own
        thread); :meth:`close` it afterwards."""
        self._stop.set()
        self.thread.join(TIMEOUT_S)

    def finish(self) -> None:
        """Stop polling and close the consumer in the member's thread (no wait)."""
        self._close_on_stop = True
        self._stop.set()


def _settled(members: list[Member], partitions: int, since: float) -> tuple[float, float] | None:
    """(seconds from ``since`` to the last callback that moved a partition, to the last
    partition resumed) once
    every partition is owned by one member, the members' shares differ by at most one and
    every owned partition was consumed since; else None."""
    snaps = [m.snapshot() for m in members]
    sizes = [len(owned) for owned, _, _ in snaps]
    union = set().union(*(owned for owned, _, _ in snaps))
    if sum(sizes) != partitions or len(union) != partitions or max(sizes) - min(sizes) > 1:
        return None
    resumed = [r[p] for owned, r, _ in snaps for p in owned if p in r]
    if len(resumed) != partitions:
        return None
    last_change = max(change for _, _, change in snaps)
    return max(last_change - since, 0.0), max(resumed) - since


def _wait_settled(
    members: list[Member], partitions: int, since: float, what: str
) -> tuple[float, float]:
    """Wait until :func:`_settled` holds and no callback came for :data:`QUIET_S`."""
    deadline = time.perf_counter() + TIMEOUT_S
    while True:
        first = _settled(members, partitions, since)
        if first is not None:
            time.sleep(QUIET_S)
            again = _settled(members, partitions, since)
            if again is not None and again[0] == first[0]:
                return first
        if time.perf_counter() > deadline:
            shares = [sorted(m.snapshot()[0]) for m in members]
            errors = [e for m in members for e in m.errors]
            raise TimeoutError(f"{what}: not settled in {TIMEOUT_S:.0f} s: {shares} {errors}")
        time.sleep(0.005)


class SteadyProducer:
    """One ``size``-byte record to every partition every ``interval`` seconds, in a thread."""

    def __init__(self, bootstrap: str, topic: str, partitions: int, interval: float = 0.01):
        self._stop = threading.Event()
        self._producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 2})
        self._args = (topic, partitions, interval)
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        topic, partitions, interval = self._args
        value = b"x" * 100
        while not self._stop.is_set():
            for p in range(partitions):
                self._producer.produce(topic, value, partition=p)
            self._producer.poll(0)
            time.sleep(interval)

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(TIMEOUT_S)
        self._producer.flush(30)
        del self._producer  # its connections close now, not when the broker stops


def _rebalance_run(
    bootstrap: str, protocol: str, tag: str, args: argparse.Namespace, offset_s: float
) -> dict[str, float]:
    """N - 1 members settle; ``offset_s`` later the N-th joins; once settled, ``offset_s``
    later the first leaves. Seconds per change."""
    topic, partitions = REBALANCE_TOPIC, 2 * args.members
    group = f"rb-{protocol}-{tag}"
    conf = _member_conf(bootstrap, group, protocol, args.heartbeat_ms, args.session_ms)
    members = [Member(conf, topic) for _ in range(args.members - 1)]
    out: dict[str, float] = {}
    try:
        _wait_settled(members, partitions, time.perf_counter(), f"{protocol} start")
        time.sleep(offset_s)  # members keep polling: where in their heartbeat cycle to join
        since = time.perf_counter()
        for m in members:
            m.mark()
        members.append(Member(conf, topic))
        out["join owned"], out["join resumed"] = _wait_settled(
            members, partitions, since, f"{protocol} join"
        )
        time.sleep(offset_s)
        leaver = members.pop(0)
        leaver.pause()
        since = time.perf_counter()
        for m in members:
            m.mark()
        leaver.consumer.close()
        out["leave owned"], out["leave resumed"] = _wait_settled(
            members, partitions, since, f"{protocol} leave"
        )
    finally:
        for m in members:
            m.finish()
        for m in members:
            m.thread.join(TIMEOUT_S)
    return out


# -- share group against a classic consumer ----------------------------------------------


def _produce_records(bootstrap: str, topic: str, count: int, size: int) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    value = b"x" * size
    for _ in range(count):
        while True:
            try:
                producer.produce(topic, value, partition=0)
                break
            except BufferError:
                producer.poll(0.05)
    if producer.flush(120):
        raise RuntimeError("records not produced")


def _classic_read(bootstrap: str, topic: str, count: int, group: str) -> dict[str, float]:
    """One classic consumer (auto commit) reads ``count`` records from the start."""
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": group,
            "group.protocol": "classic",
            "auto.offset.reset": "earliest",
            "enable.auto.commit": True,
        }
    )
    started = time.perf_counter()
    consumer.subscribe([topic])
    got, first, first_n = 0, 0.0, 0
    deadline = started + 10 * TIMEOUT_S
    try:
        while got < count:
            n = sum(1 for m in consumer.consume(1000, 0.5) if m.error() is None)
            if n and not first:
                first, first_n = time.perf_counter(), n
            got += n
            if time.perf_counter() > deadline:
                raise TimeoutError(f"classic consumer: {got} of {count}")
        end = time.perf_counter()
    finally:
        consumer.close()
    return {
        "rate": _rate(count, first_n, first, end, started),
        "rate incl. join": count / (end - started),
        "delivered": float(got),
    }


def _rate(count: int, first_n: int, first: float, end: float, started: float) -> float:
    """Records per second from the first delivery to the last (the first poll's records
    not counted: their wait is the group join); from the subscribe when one poll had all."""
    if count > first_n and end > first:
        return (count - first_n) / (end - first)
    return count / (end - started)


def _set_earliest(bootstrap: str, group: str) -> None:
    """``share.auto.offset.reset=earliest`` on the share group (records produced before it
    first fetches count)."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    entry = ConfigEntry(
        "share.auto.offset.reset", "earliest", incremental_operation=AlterConfigOpType.SET
    )
    resource = ConfigResource(ResourceType.GROUP, group, incremental_configs=[entry])
    for fut in admin.incremental_alter_configs([resource]).values():
        fut.result(30)


def _share_read(
    bootstrap: str, topic: str, count: int, group: str, consumers_n: int
) -> dict[str, float]:
    """``consumers_n`` share consumers (implicit acknowledgement), each polled by its own
    thread, read until ``count`` records came; every delivery is counted."""
    _set_earliest(bootstrap, group)
    lock = threading.Lock()
    offsets: list[list[int]] = [[] for _ in range(consumers_n)]
    state = {"got": 0, "first": 0.0, "first_n": 0, "end": 0.0}
    done = threading.Event()
    errors: list[str] = []

    def run(i: int, consumer: ShareConsumer) -> None:
        try:
            while not done.is_set():
                msgs = [m for m in consumer.poll(0.2) if m.error() is None]
                if not msgs:
                    continue
                now = time.perf_counter()
                offsets[i].extend(m.offset() for m in msgs)
                with lock:
                    if not state["first"]:
                        state["first"], state["first_n"] = now, len(msgs)
                    state["got"] += len(msgs)
                    if state["got"] >= count and not state["end"]:
                        state["end"] = now
                        done.set()
            consumer.commit_sync(30)
        except Exception as exc:  # reported by the caller
            errors.append(repr(exc))
            done.set()
        finally:
            consumer.close()

    started = time.perf_counter()
    threads = []
    for i in range(consumers_n):
        consumer = ShareConsumer({"bootstrap.servers": bootstrap, "group.id": group})
        consumer.subscribe([topic])
        threads.append(threading.Thread(target=run, args=(i, consumer), daemon=True))
        threads[-1].start()
    if not done.wait(10 * TIMEOUT_S):
        errors.append(f"timed out: {state['got']} of {count}")
    done.set()
    for t in threads:
        t.join(TIMEOUT_S)
    if errors:
        raise RuntimeError(f"share consumers: {errors}")
    every = [o for per in offsets for o in per]
    unique = len(set(every))
    if unique != count:
        raise RuntimeError(f"share consumers: {unique} distinct records of {count}")
    end = state["end"]
    return {
        "rate": _rate(count, int(state["first_n"]), state["first"], end, started),
        "rate incl. join": count / (end - started),
        "delivered": float(len(every)),
        "duplicates": float(len(every) - unique),
        "busiest share": max(len(per) for per in offsets) / len(every),
        "consumers with records": float(sum(1 for per in offsets if per)),
    }


# -- the report --------------------------------------------------------------------------


def _create_topic(bootstrap: str, topic: str, partitions: int) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, partitions)])[topic].result(30)


def _row(
    metric: str, value: float, unit: str, *, reference: str = "", ref_value: float = 0.0,
    goal: str = "",
) -> dict[str, Any]:  # fmt: skip
    """One table row; ``goal`` "≤ 0.5x" / "≥ 0.5x" is checked against the ratio."""
    ratio = value / ref_value if ref_value else None
    met = value == 0 if goal == "0" else None
    if ratio is not None and goal.startswith(("≤", "≥")):
        bound = float(goal[1:].strip().rstrip("x"))
        met = ratio <= bound if goal[0] == "≤" else ratio >= bound
    return {
        "metric": metric,
        "value": value,
        "unit": unit,
        "reference": reference,
        "reference_value": ref_value,
        "ratio": ratio,
        "goal": goal,
        "met": met,
    }


def _fmt(value: float, unit: str) -> str:
    if unit == "s":
        return f"{value:.2f} s"
    if unit == "records/s":
        return f"{value:,.0f} records/s"
    return f"{value:,.0f} {unit}".strip()


def _table(rows: list[dict[str, Any]]) -> str:
    lines = [
        "| metric | seglog | reference (same run) | ratio | goal |",
        "|---|--:|---|--:|---|",
    ]
    for r in rows:
        ref = f"{_fmt(r['reference_value'], r['unit'])} {r['reference']}" if r["reference"] else "—"
        ratio = f"{r['ratio']:.2f}x" if r["reference"] else ""
        mark = "" if r["met"] is None else (" ✓" if r["met"] else " ✗")
        value = _fmt(r["value"], r["unit"])
        lines.append(f"| {r['metric']} | {value} | {ref} | {ratio} | {r['goal']}{mark} |")
    return "\n".join(lines)


def _rows(samples: dict[str, list[float]], args: argparse.Namespace) -> list[dict[str, Any]]:
    med = {k: statistics.median(v) for k, v in samples.items()}
    n, p = args.members, 2 * args.members
    rows = []
    events = (("join", f"member {n} joins {n - 1}"), ("leave", f"1 of {n} leaves"))
    for event, text in events if args.part != "share" else ():
        for what, desc in (("owned", "all partitions owned"), ("resumed", "consumption resumed")):
            for classic, name in CLASSIC.items():
                rows.append(
                    _row(
                        f"rebalance, {text} ({p} partitions): {desc}, KIP-848",
                        med[f"consumer {event} {what}"], "s", reference=name,
                        ref_value=med[f"{classic} {event} {what}"], goal="≤ 0.5x",
                    )
                )  # fmt: skip
    if args.part == "rebalance":
        return rows
    k = args.share_consumers
    share = f"share group, {k} consumers, 1 partition"
    rows.append(
        _row(
            f"{share}: delivery rate (first record to last)", med["share rate"], "records/s",
            reference="1 classic consumer", ref_value=med["classic rate"], goal="≥ 0.5x",
        )
    )  # fmt: skip
    rows.append(
        _row(
            f"{share}: delivery rate incl. joining", med["share rate incl. join"], "records/s",
            reference="1 classic consumer", ref_value=med["classic rate incl. join"],
        )
    )  # fmt: skip
    rows.append(
        _row(
            f"{share}: records delivered twice", max(samples["share duplicates"]), "records",
            goal="0",
        )
    )  # fmt: skip
    return rows


def _rebalance_part(b: str, args: argparse.Namespace, samples: dict[str, list[float]]) -> None:
    """Every protocol's rebalance runs, ``--repeat`` times (the order rotating)."""
    _create_topic(b, REBALANCE_TOPIC, 2 * args.members)
    producer = SteadyProducer(b, REBALANCE_TOPIC, 2 * args.members)
    try:
        for r in range(args.repeat):
            order = PROTOCOLS[r % 3 :] + PROTOCOLS[: r % 3]
            offset_s = _phase_offset(r, args)
            for protocol in order:
                got = _rebalance_run(b, protocol, str(r), args, offset_s)
                for key, value in got.items():
                    samples.setdefault(f"{protocol} {key}", []).append(value)
                _log(
                    f"repeat {r + 1} {protocol}: "
                    + ", ".join(f"{k} {v:.3f} s" for k, v in got.items())
                )
    finally:
        producer.stop()


def _phase_offset(r: int, args: argparse.Namespace) -> float:
    """Seconds from "settled" to the change in repeat ``r`` (see ``--phase``)."""
    if args.phase == "settled":
        return 0.0
    return (r + 0.5) / args.repeat * args.heartbeat_ms / 1000


def _share_part(b: str, args: argparse.Namespace, samples: dict[str, list[float]]) -> None:
    """The share group and the classic consumer over the same records, ``--repeat`` times
    (which goes first alternating)."""
    for r in range(args.repeat):
        topic = f"share-{r}"
        _create_topic(b, topic, 1)
        _produce_records(b, topic, args.records, args.size)
        names = ["classic", "share"] if r % 2 == 0 else ["share", "classic"]
        for name in names:
            if name == "classic":
                got = _classic_read(b, topic, args.records, f"classic-{r}")
            else:
                got = _share_read(b, topic, args.records, f"share-{r}", args.share_consumers)
            for key, value in got.items():
                samples.setdefault(f"{name} {key}", []).append(value)
            _log(f"repeat {r + 1} {name}: {got['rate']:,.0f} records/s")


def main() -> None:
    """Start one broker, run both parts ``--repeat`` times, print the medians."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=200_000, help="share-group part")
    parser.add_argument("--size", type=int, default=100, help="record value bytes")
    parser.add_argument("--members", type=int, default=10, help="rebalance part (2..20)")
    parser.add_argument("--share-consumers", type=int, default=4)
    parser.add_argument("--heartbeat-ms", type=int, default=500)
    parser.add_argument("--session-ms", type=int, default=6000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument(
        "--phase", choices=("spread", "settled"), default="spread",
        help="when a join or leave starts in the members' heartbeat cycle (see above)",
    )  # fmt: skip
    parser.add_argument("--json", type=Path, help="write the rows, settings and samples here")
    parser.add_argument(
        "--part", choices=("all", "rebalance", "share"), default="all",
        help="run only the rebalance or the share-group part (its rows only)",
    )  # fmt: skip
    args = parser.parse_args()
    if not 2 <= args.members <= 20:
        parser.error("--members must be 2..20")
    partitions = 2 * args.members
    broker_args = [
        "--group-consumer-heartbeat-interval-ms", str(args.heartbeat_ms),
        "--group-consumer-session-timeout-ms", str(args.session_ms),
        "--group-min-session-timeout-ms", str(min(args.session_ms, 6000)),
        "--group-initial-rebalance-delay-ms", str(INITIAL_REBALANCE_DELAY_MS),
    ]  # fmt: skip
    samples: dict[str, list[float]] = {}
    started = time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp:
        broker = start_broker(Path(tmp) / "data", extra_args=broker_args)
        b = broker.bootstrap
        try:
            if args.part in ("all", "rebalance"):
                _rebalance_part(b, args, samples)
            if args.part in ("all", "share"):
                _share_part(b, args, samples)
        finally:
            broker.stop()
    rows = _rows(samples, args)
    settings = {
        "members": args.members,
        "partitions": partitions,
        "heartbeat_interval_ms": args.heartbeat_ms,
        "phase": args.phase,
        "session_timeout_ms": args.session_ms,
        "group_initial_rebalance_delay_ms": INITIAL_REBALANCE_DELAY_MS,
        "kip848_assignor": "uniform (broker default)",
        "records": args.records,
        "record_bytes": args.size,
        "share_consumers": args.share_consumers,
        "repeat": args.repeat,
        "seconds": round(time.perf_counter() - started, 1),
    }
    print(
        f"{args.members} members / {partitions} partitions, heartbeat {args.heartbeat_ms} ms,"
        f" session {args.session_ms} ms, phase {args.phase},"
        f" classic group.initial.rebalance.delay.ms"
        f" {INITIAL_REBALANCE_DELAY_MS}; {args.records:,} x {args.size} B;"
        f" medians of {args.repeat} ({settings['seconds']} s)"
    )
    print(_table(rows))
    if args.part != "rebalance":
        busiest = statistics.median(samples["share busiest share"])
        print(
            f"share consumers with records (median): "
            f"{statistics.median(samples['share consumers with records']):.0f} of"
            f" {args.share_consumers}, the busiest got {busiest:.0%} of the deliveries"
        )
    if args.json:
        doc = {"settings": settings, "rows": rows, "samples": samples}
        args.json.write_text(json.dumps(doc, indent=2) + "\n")


if __name__ == "__main__":
    main()
