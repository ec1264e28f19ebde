"""kill -9 and power-loss cycles over a crash writer (``_writer.py``), and the verifier.

Used by tests/crash (≥ 200 kill -9 cycles, ≥ 100 power-loss cycles per policy) and by
scripts/soak.py (≥ 1000). A cycle: fork a writer, let it publish for a random number of
acknowledgements plus a random delay, SIGKILL it, optionally cut the power (the FUSE
filesystem drops everything not fsynced), then verify the log read-only: every stored
message is the one written at its offset (byte for byte), offsets contiguous from 0, and
every acknowledged offset is stored.
"""

from __future__ import annotations

import json
import os
import pathlib
import random
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from seglog.storage import Log, LogConfig

from ._writer import expected_message

WRITER = pathlib.Path(__file__).with_name("_writer.py")
REPO = pathlib.Path(__file__).resolve().parents[2]


class Zygote:
    """The fork server of ``_writer.py`` (a subprocess; ``close`` ends it)."""

    def __init__(self) -> None:
        env = dict(os.environ, PYTHONPATH=str(REPO / "src"))
        self.proc = subprocess.Popen(
            [sys.executable, str(WRITER)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            env=env,
            cwd=str(REPO),
        )
        assert self.proc.stdin is not None
        assert self.proc.stdout is not None
        self._in, self._out = self.proc.stdin, self.proc.stdout

    def _line(self) -> str:
        line = self._out.readline()
        if not line:
            raise RuntimeError(f"crash writer zygote died (exit {self.proc.poll()})")
        return line.decode().strip()

    def run_and_kill(
        self,
        path: pathlib.Path,
        config: dict[str, Any],
        seed: int,
        kill_after_acks: int,
        delay_s: float,
        *,
        before_kill: Callable[[], None] | None = None,
        max_batch: int = 40,
    ) -> tuple[list[tuple[int, int]], str | None]:
        """Start a writer, SIGKILL it after ``kill_after_acks`` acknowledgements and
        ``delay_s`` more seconds; ``(acks [(start, end)], error line or None)``."""
        spec = {"path": str(path), "config": config, "seed": seed, "max_batch": max_batch}
        self._in.write(b"run " + json.dumps(spec).encode() + b"\n")
        self._in.flush()
        first = self._line()
        assert first.startswith("pid "), first
        pid = int(first.split()[1])
        acks: list[tuple[int, int]] = []
        error = None
        while len(acks) < kill_after_acks:
            line = self._line()
            if line.startswith("ack "):
                _, a, b = line.split()
                acks.append((int(a), int(b)))
            elif line.startswith("err "):
                error = line
            elif line.startswith("exit "):
                return acks, error or line
        if delay_s > 0:
            time.sleep(delay_s)
        if before_kill is not None:
            before_kill()
        os.kill(pid, signal.SIGKILL)  # our own writer child, by pid
        while True:
            line = self._line()
            if line.startswith("ack "):
                _, a, b = line.split()
                acks.append((int(a), int(b)))
            elif line.startswith("err "):
                error = line
            elif line.startswith("exit "):
                status = int(line.split()[2])
                if not (os.WIFSIGNALED(status) and os.WTERMSIG(status) == signal.SIGKILL):
                    error = error or f"writer ended by itself: {line}"
                return acks, error

    def run_op(self, spec: dict[str, Any]) -> tuple[str, int]:
        """Run a maintenance operation child (``_writer._op_child``) to its end or its
        crash point: ``("done", mutating calls made)`` or ``("killed", 0)``."""
        self._in.write(b"op " + json.dumps(spec).encode() + b"\n")
        self._in.flush()
        first = self._line()
        assert first.startswith("pid "), first
        result: tuple[str, int] | None = None
        while True:
            line = self._line()
            if line.startswith("done "):
                result = ("done", int(line.split()[1]))
            elif line.startswith("err "):
                raise AssertionError(f"maintenance child failed: {line}")
            elif line.startswith("exit "):
                status = int(line.split()[2])
                if result is not None:
                    return result
                assert os.WIFSIGNALED(status), line
                assert os.WTERMSIG(status) == signal.SIGKILL, line
                return ("killed", 0)

    def close(self) -> None:
        """End the zygote (EOF on its stdin) and wait for it."""
        try:
            self._in.close()
        finally:
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
            self._out.close()


def log_file_bytes(path: pathlib.Path) -> int:
    """Bytes in the ``.log`` files of a partition directory (0 if it does not exist)."""
    if not path.is_dir():
        return 0
    return sum(e.stat().st_size for e in os.scandir(path) if e.name.endswith(".log"))


def verify_messages(log: Log, start: int, end: int) -> None:
    """Assert offsets ``[start, end)`` are stored contiguously, each message exactly
    :func:`expected_message` of its offset (key, value, timestamp)."""
    offset = start
    while offset < end:
        nxt, msgs = log.consume(offset, 2000)
        assert msgs, f"no message at offset {offset} (end {end})"
        for m in msgs:
            assert m.offset == offset, f"hole or duplicate: expected {offset}, got {m.offset}"
            key, value, ts = expected_message(offset)
            assert m.key == key, f"offset {offset}: key {m.key!r} != {key!r}"
            assert m.value == value, f"offset {offset}: value differs ({len(m.value or b'')} B)"
            assert m.timestamp == ts, f"offset {offset}: timestamp {m.timestamp} != {ts}"
            offset += 1
        assert nxt == offset


@dataclass
class CycleStats:
    """Figures of a run of crash cycles."""

    cycles: int = 0
    acked_messages: int = 0
    acked_publishes: int = 0
    lost_acked: int = 0
    """Acknowledged messages missing after the crash (must be 0 unless the policy
    allows it: the negative control)."""
    cycles_with_loss: int = 0
    torn_tails: int = 0
    """Cycles that left bytes past the last whole valid batch (truncated on reopen)."""
    torn_bytes: int = 0
    unacked_kept: int = 0
    """Messages written but not yet acknowledged when killed that survived anyway."""
    writer_errors: list[str] = field(default_factory=list)
    seconds: float = 0.0
    end_offset: int = 0

    def line(self, label: str) -> str:
        """One printable line of figures."""
        return (
            f"{label}: {self.cycles} cycles in {self.seconds:.1f} s, "
            f"{self.acked_messages} acknowledged messages ({self.acked_publishes} publishes), "
            f"lost acknowledged {self.lost_acked} (in {self.cycles_with_loss} cycles), "
            f"torn tails {self.torn_tails} ({self.torn_bytes} B truncated), "
            f"unacknowledged kept {self.unacked_kept}, final log end offset {self.end_offset}"
        )


def crash_cycles(
    zygote: Zygote,
    path: pathlib.Path,
    cycles: int,
    *,
    config: dict[str, Any],
    seed: int,
    power_loss: Callable[[], None] | None = None,
    allow_loss: bool = False,
    full_verify_every: int = 50,
    max_acks: int = 12,
    max_delay_s: float = 0.02,
    max_batch: int = 40,
    progress: Callable[[int, CycleStats], None] | None = None,
) -> CycleStats:
    """Run ``cycles`` kill -9 cycles (``power_loss`` called after each kill: drop
    unsynced data). Asserts every stored message is the expected one, contiguous from
    0; unless ``allow_loss``, also that every acknowledged offset survived."""
    rng = random.Random(seed)
    stats = CycleStats()
    t0 = time.monotonic()
    cfg = LogConfig(**config)
    verified = acked_high = 0
    for cycle in range(cycles):
        acks, error = zygote.run_and_kill(
            path,
            config,
            seed * 100_003 + cycle,
            kill_after_acks=rng.randint(0, max_acks),
            delay_s=rng.uniform(0, max_delay_s),
            max_batch=max_batch,
        )
        if error is not None:
            stats.writer_errors.append(error)
            raise AssertionError(f"cycle {cycle}: crash writer failed: {error}")
        if power_loss is not None:
            power_loss()
        stats.cycles += 1
        stats.acked_publishes += len(acks)
        stats.acked_messages += sum(b - a for a, b in acks)
        acked_end = max(acked_high, max((b for _, b in acks), default=0))
        on_disk = log_file_bytes(path)
        if not path.is_dir():
            end = 0
            valid = 0
        else:
            with Log.open(path, cfg, read_only=True) as log:
                end = log.log_end_offset
                valid = log.stat()["bytes"]
                full = (cycle + 1) % full_verify_every == 0 or cycle + 1 == cycles
                verify_messages(log, 0 if full else min(verified, end), end)
        if on_disk > valid:
            stats.torn_tails += 1
            stats.torn_bytes += on_disk - valid
        if acked_end > end:
            stats.lost_acked += acked_end - end
            stats.cycles_with_loss += 1
            if not allow_loss:
                raise AssertionError(
                    f"cycle {cycle}: acknowledged offsets [{end}, {acked_end}) lost"
                )
        stats.unacked_kept += max(0, end - max(acked_end, verified))
        acked_high = min(acked_end, end)  # lost offsets are assigned again by the next writer
        verified = end
        stats.end_offset = end
        if progress is not None:
            progress(cycle, stats)
    stats.seconds = time.monotonic() - t0
    return stats
