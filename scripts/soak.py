"""Crash-safety soak: the tests/crash cycles, longer. Prints one line of figures per run.

    python scripts/soak.py --cycles 1000                # kill -9 x1000, power loss x250 x2
    python scripts/soak.py --cycles 1000 --dir /data    # on another filesystem
    python scripts/soak.py --cycles 200 --heavy-tests   # + every-write crash points and
                                                        #   1000 hypothesis examples

kill -9: a writer publishing (fsync before acknowledging) is SIGKILLed at random moments,
then the log is verified read-only: every acknowledged message present, byte-identical, in
order, no holes, no duplicates; torn tails counted. Power loss (root, /dev/fuse, libfuse2):
the same on a FUSE filesystem that drops everything not fsynced at each kill, with fsync
"always" (must lose nothing; a random part of each file's unsynced appends is kept: torn
writes) and "none" (negative control: must lose something).
Exit status 0 when every figure is as required.
"""

from __future__ import annotations

import argparse
import os
import pathlib
import shutil
import subprocess
import sys
import tempfile
import time

REPO = pathlib.Path(__file__).resolve().parents[1]
sys.path[:0] = [str(REPO), str(REPO / "src")]

from tests.crash._harness import CycleStats, Zygote, crash_cycles  # noqa: E402


def _progress(label: str, total: int):  # type: ignore[no-untyped-def]
    t0 = time.monotonic()

    def report(cycle: int, stats: CycleStats) -> None:
        if (cycle + 1) % 100 == 0 or cycle + 1 == total:
            print(
                f"  {label}: {cycle + 1}/{total} cycles, {time.monotonic() - t0:.0f} s, "
                f"{stats.acked_messages} acknowledged, lost {stats.lost_acked}, "
                f"torn tails {stats.torn_tails}",
                flush=True,
            )

    return report


def run_kill9(cycles: int, base: pathlib.Path, seed: int) -> bool:
    """kill -9 cycles on ``base``; True when nothing acknowledged was lost."""
    config = {"segment_bytes": 1 << 20, "index_interval_bytes": 4096}
    zygote = Zygote()
    work = pathlib.Path(tempfile.mkdtemp(prefix="seglog-soak-", dir=base))
    try:
        stats = crash_cycles(
            zygote,
            work / "p",
            cycles,
            config=config,
            seed=seed,
            full_verify_every=100,
            progress=_progress("kill -9", cycles),
        )
    finally:
        zygote.close()
        shutil.rmtree(work, ignore_errors=True)
    print(stats.line(f"kill -9 (fsync always, {base})"), flush=True)
    return stats.lost_acked == 0 and stats.cycles == cycles


def run_power_loss(cycles: int, seed: int) -> bool:
    """Power-loss cycles on the lazy FUSE filesystem, fsync always and none."""
    from tests.crash._mounts import lazy_mount  # noqa: PLC0415  (imports pytest)

    ok = True
    config = {"segment_bytes": 384 << 10, "index_interval_bytes": 4096}
    policies = [
        ("always, torn unsynced appends", {}, False),
        ("none, negative control", {"flush_messages": 1 << 62}, True),
    ]
    for name, extra, allow in policies:
        root = pathlib.Path(tempfile.mkdtemp(prefix="seglog-soak-fuse-"))
        zygote = Zygote()
        try:
            with lazy_mount(root / "mnt") as fs:
                stats = crash_cycles(
                    zygote,
                    fs.path / "p",
                    cycles,
                    config={**config, **extra},
                    seed=seed,
                    power_loss=fs.power_loss if allow else fs.power_loss_torn,
                    allow_loss=allow,
                    max_acks=6,
                    max_batch=12,
                    full_verify_every=100,
                    progress=_progress(f"power loss ({name})", cycles),
                )
                counters = fs.counters()
        finally:
            zygote.close()
            shutil.rmtree(root, ignore_errors=True)
        print(stats.line(f"power loss (fsync {name})") + f", fs counters {counters}", flush=True)
        ok = ok and (stats.lost_acked > 0 if allow else stats.lost_acked == 0)
    return ok


def run_heavy_tests() -> bool:
    """The maintenance crash tests with a crash before every write() too (and at every
    point under power loss), and the hypothesis model with 1000 examples (figures
    printed by pytest's summary)."""
    env = dict(
        os.environ,
        SEGLOG_CRASH_WRITES="1",
        SEGLOG_CRASH_ALL_POINTS="1",
        SEGLOG_MODEL_EXAMPLES="1000",
    )
    files = ["tests/crash/test_maintenance_crash.py", "tests/crash/test_model.py"]
    r = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *files],
        cwd=REPO,
        env=env,
        check=False,
    )
    return r.returncode == 0


def main() -> int:
    """Parse the options, run the soak, print the figures; exit status 1 on a failure."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--cycles", type=int, default=1000, help="kill -9 cycles (default 1000)")
    ap.add_argument(
        "--power-loss-cycles",
        type=int,
        default=None,
        help="power-loss cycles per policy (default: cycles / 4, at least 100; 0: skip)",
    )
    ap.add_argument("--dir", type=pathlib.Path, default=None, help="where the kill -9 log lives")
    ap.add_argument("--seed", type=int, default=int(time.time()))
    ap.add_argument("--heavy-tests", action="store_true", help="also the heavy pytest runs")
    args = ap.parse_args()
    base = args.dir or pathlib.Path(tempfile.gettempdir())
    pl = args.power_loss_cycles
    if pl is None:
        pl = max(100, args.cycles // 4)
    print(f"seglog crash soak: seed {args.seed}, kill -9 x{args.cycles}, power loss x{pl}")
    t0 = time.monotonic()
    ok = run_kill9(args.cycles, base, args.seed)
    if pl:
        if os.geteuid() != 0 or not os.path.exists("/dev/fuse"):
            print("power loss: needs root and /dev/fuse (FAILED: capability missing)")
            ok = False
        else:
            ok = run_power_loss(pl, args.seed) and ok
    if args.heavy_tests:
        ok = run_heavy_tests() and ok
    print(f"soak {'passed' if ok else 'FAILED'} in {time.monotonic() - t0:.0f} s")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
