"""Index files deleted, truncated, zeroed, garbage, non-monotonic: rebuilt, and 10,000
random lookups (offset → batch, time → offset) answer exactly as before the damage."""

from __future__ import annotations

import os
import pathlib
import random

import pytest
from tests.storage._batches import make_batch

from seglog.storage import Log, LogConfig, check

from .conftest import record_figure

CFG = LogConfig(segment_bytes=6000, index_interval_bytes=300)
LOOKUPS = 10_000
T0 = 1_600_000_000_000


def _build(p: pathlib.Path) -> None:
    rng = random.Random(5)
    with Log.open(p, CFG, create=True) as log:
        for i in range(240):
            # timestamps mostly rising, with jitter (the time index keeps maxima only)
            ts = T0 + 100 * i + rng.randint(-250, 250)
            log.append(make_batch(rng.randint(1, 4), timestamp=ts, value_size=rng.randint(5, 90)))
        log.sync()


def _lookups(log: Log, seed: int, count: int = LOOKUPS) -> list[object]:
    rng = random.Random(seed)
    end = log.log_end_offset
    out: list[object] = []
    for _ in range(count * 7 // 10):
        data = log.read(rng.randrange(end), 1)
        out.append(data[:12])  # baseOffset + batchLength of the batch found
    for _ in range(count - len(out)):
        out.append(log.offset_for_time(T0 + rng.randint(-1000, 25_000)))
    return out


def _damage(path: pathlib.Path, how: str, entry: int, rng: random.Random) -> None:
    data = path.read_bytes()
    if how == "deleted":
        path.unlink()
    elif how == "truncated_entry":  # whole entries dropped at the end
        path.write_bytes(data[: max(0, len(data) - 2 * entry)])
    elif how == "truncated_mid":
        path.write_bytes(data[: max(0, len(data) - entry // 2 - 1)])
    elif how == "zeroed":
        path.write_bytes(bytes(len(data)))
    elif how == "garbage":
        path.write_bytes(rng.randbytes(len(data)))
    elif how == "non_monotonic":  # two entries swapped
        n = len(data) // entry
        assert n >= 2, path
        i = rng.randrange(n - 1)
        a, b = data[i * entry : (i + 1) * entry], data[(i + 1) * entry : (i + 2) * entry]
        path.write_bytes(data[: i * entry] + b + a + data[(i + 2) * entry :])
    else:
        raise AssertionError(how)


DAMAGES = ["deleted", "truncated_entry", "truncated_mid", "zeroed", "garbage", "non_monotonic"]


@pytest.mark.parametrize("kind", ["index", "timeindex"])
def test_damaged_indexes_rebuilt_and_10000_lookups_identical(shm_path, kind):
    p = shm_path / "p"
    _build(p)
    with Log.open(p, CFG) as log:
        before = _lookups(log, 1)
        before2 = _lookups(log, 2, 1000)
    good = {n: (p / n).read_bytes() for n in os.listdir(p) if n.endswith("index")}
    targets = sorted(n for n in good if n.endswith("." + kind))
    assert len(targets) >= 5
    entry = 8 if kind == "index" else 12
    rng = random.Random(9)
    done = []
    for how in DAMAGES:
        for crash in (False, True):
            for n in targets[:-1]:  # every closed segment (the active one too, below)
                if len(good[n]) >= 2 * entry:
                    _damage(p / n, how, entry, rng)
            _damage(p / targets[-1], how, entry, rng) if len(
                good[targets[-1]]
            ) >= 2 * entry else None
            if crash:
                (p / ".clean_shutdown").unlink()
            with Log.open(p, CFG) as log:
                after = _lookups(log, 1)
            assert after == before, f"{kind} {how} crash={crash}: lookups differ"
            report = check(p)[0]
            assert report.ok, (how, crash, report)
            assert report.index_problems == [], (how, crash, report)
            with Log.open(p, CFG) as log:  # and trusted as rebuilt after a clean shutdown
                assert _lookups(log, 2, 1000) == before2, f"{kind} {how}: rebuilt index misleads"
            rebuilt = {n: (p / n).read_bytes() for n in targets}
            assert rebuilt == {n: good[n] for n in targets}, f"{kind} {how}: not rebuilt"
            done.append(f"{how}{'+crash' if crash else ''}")
    record_figure(
        f"{kind} damage: {len(done)} cases ({', '.join(DAMAGES)}; after a clean shutdown and "
        f"after a crash) on {len(targets)} segments, each rebuilt byte-identical and "
        f"{LOOKUPS} random lookups identical"
    )
