"""kill -9 of a publishing writer, 200 cycles: nothing acknowledged is lost."""

from __future__ import annotations

from ._harness import crash_cycles
from .conftest import record_figure

CYCLES = 200


def test_kill_9_200_cycles_keep_every_acknowledged_message(shm_path, zygote):
    # /dev/shm: kill -9 keeps the page cache anyway (power loss is test_powerloss.py);
    # small segments: rolls, recovery points and several segments per cycle are exercised
    config = {"segment_bytes": 256 << 10, "index_interval_bytes": 4096}
    stats = crash_cycles(
        zygote, shm_path / "p", CYCLES, config=config, seed=20261123, max_acks=8, max_batch=30
    )
    record_figure(stats.line("kill -9 (fsync always)"))
    assert stats.cycles == CYCLES
    assert stats.lost_acked == 0
    assert stats.acked_messages > CYCLES  # the writers really published
    assert stats.end_offset >= stats.acked_messages
