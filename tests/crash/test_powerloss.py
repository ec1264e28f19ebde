"""Power loss on a FUSE filesystem that drops everything not fsynced (keeping a random
part of unsynced appends in the "always" run: torn writes).

fsync "always" (the default: fsync before acknowledging) must lose nothing acknowledged;
"none" (flush.messages huge: acknowledged at once, never fsynced) must show loss, proving
the harness can see it (negative control).
"""

from __future__ import annotations

from ._harness import crash_cycles
from ._mounts import lazy_mount
from .conftest import record_figure

CYCLES = 100
SEGMENT = {"segment_bytes": 384 << 10, "index_interval_bytes": 4096}
# FUSE costs ~1 ms per file operation: keep the log to a few MB and a few segments
SMALL = {"max_acks": 6, "max_batch": 12}


def test_power_loss_fsync_always_loses_nothing(tmp_path, zygote):
    with lazy_mount(tmp_path / "mnt") as fs:
        stats = crash_cycles(
            zygote,
            fs.path / "p",
            CYCLES,
            config=SEGMENT,
            seed=7,
            power_loss=fs.power_loss_torn,
            **SMALL,
        )
        counters = fs.counters()
    record_figure(
        stats.line("power loss (fsync always, torn unsynced appends)") + f", fs {counters}"
    )
    assert stats.cycles == CYCLES
    assert counters["powerloss"] == CYCLES
    assert stats.lost_acked == 0
    assert stats.acked_messages > CYCLES


def test_power_loss_fsync_none_shows_loss(tmp_path, zygote):
    config = {**SEGMENT, "flush_messages": 1 << 62}
    with lazy_mount(tmp_path / "mnt") as fs:
        stats = crash_cycles(
            zygote,
            fs.path / "p",
            CYCLES,
            config=config,
            seed=8,
            power_loss=fs.power_loss,
            allow_loss=True,
            **SMALL,
        )
    record_figure(stats.line("power loss (fsync none, negative control)"))
    assert stats.cycles == CYCLES
    assert stats.lost_acked > 0, "the harness saw no loss without fsync: it cannot see loss"
    assert stats.cycles_with_loss > CYCLES // 4
