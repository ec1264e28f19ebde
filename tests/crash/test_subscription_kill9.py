"""kill -9 of a durable subscriber (``_sub_writer.py``) fetching and acknowledging: after
each crash every delivered-but-unacknowledged message is still pending (redelivered),
and no message whose ack returned is pending or ever delivered again."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys

from seglog.storage import open_log

from ._harness import REPO
from ._sub_writer import ACK_WAIT_MS, MAX_IN_FLIGHT, NAME

WRITER = REPO / "tests" / "crash" / "_sub_writer.py"
CYCLES = 12


def _run_and_kill(path, seed: int, kill_after_acks: int) -> list[list[str]]:
    """Run a subscriber, SIGKILL it after ``kill_after_acks`` returned acks; its lines."""
    env = dict(os.environ, PYTHONPATH=str(REPO / "src"))
    proc = subprocess.Popen(
        [sys.executable, str(WRITER), str(path), str(seed)], stdout=subprocess.PIPE, env=env
    )
    assert proc.stdout is not None
    lines: list[list[str]] = []
    acks = 0
    try:
        while acks < kill_after_acks:
            raw = proc.stdout.readline()
            assert raw, f"subscriber ended by itself (exit {proc.wait()})"
            lines.append(raw.decode().split())
            acks += lines[-1][0] == "acked"
        os.kill(proc.pid, signal.SIGKILL)  # our own child, by pid
        lines.extend(raw.decode().split() for raw in proc.stdout)  # what it wrote before
    finally:
        proc.kill()
        proc.wait()
        proc.stdout.close()
    assert proc.returncode == -signal.SIGKILL
    complete = [line for line in lines if line]
    assert complete[0] == ["ready"]
    return complete[1:]


def test_kill_9_subscriber_redelivers_every_unacked_and_no_acked(shm_path):
    rng = random.Random(20261125)
    path = shm_path / "p"
    acked: set[int] = set()  # acks that returned: never pending, never delivered again
    unacked: set[int] = set()  # delivered, no ack attempted: must stay pending
    deliveries = redeliveries = 0
    for cycle in range(CYCLES):
        for line in _run_and_kill(path, seed=cycle, kill_after_acks=rng.randint(1, 12)):
            offsets = {int(o) for o in line[1:]}
            if line[0] == "deliver":
                offset, count = int(line[1]), int(line[2])
                assert offset not in acked, f"acknowledged offset {offset} delivered again"
                unacked.add(offset)
                deliveries += 1
                redeliveries += count > 0
            elif line[0] == "acking":
                unacked -= offsets  # the ack may or may not have happened
            elif line[0] == "acked":
                acked |= offsets
        with open_log(path) as log:
            sub = log.subscribe(NAME, ack_wait_ms=ACK_WAIT_MS, max_in_flight=MAX_IN_FLIGHT)
            pending = set(sub.pending())
            assert not pending & acked, f"acknowledged offsets pending: {pending & acked}"
            assert unacked <= pending, f"unacknowledged offsets lost: {unacked - pending}"
            assert sub.position > max(unacked | acked, default=-1)
    assert len(acked) > CYCLES
    assert redeliveries > 0
    assert deliveries > len(acked)
