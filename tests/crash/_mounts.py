"""Mounts for the crash suite: the lazy FUSE filesystem and a small tmpfs.

Both need root (and /dev/fuse, fusermount, libfuse2 for FUSE). When a capability is
missing the test FAILS with a message naming it (CI runs as root: a skip would hide a
broken setup). Every mount is unmounted in teardown, whatever happened.
"""

from __future__ import annotations

import contextlib
import json
import os
import pathlib
import shutil
import subprocess
import sys
from collections.abc import Iterator

import pytest
from tests._wait import wait_until

from ._harness import REPO

LAZYFS = pathlib.Path(__file__).with_name("_lazyfs.py")


def require_root(what: str) -> None:
    """Fail the test (not skip) when not root."""
    if os.geteuid() != 0:
        pytest.fail(f"{what} needs root (mount); CI runs as root: run the suite as root")


def require_fuse() -> None:
    """Fail the test with the missing piece when FUSE cannot be used here."""
    require_root("the FUSE power-loss harness")
    if not os.path.exists("/dev/fuse"):
        pytest.fail("/dev/fuse is missing: the FUSE power-loss harness cannot mount")
    if shutil.which("fusermount") is None:
        pytest.fail("fusermount is missing: `apt-get install fuse libfuse2` (see .ci/run)")
    try:
        import fuse  # noqa: F401, PLC0415  (here: a missing libfuse2 fails this test only)
    except (ImportError, OSError) as e:
        pytest.fail(f"fusepy unusable ({e}): `apt-get install libfuse2`, pip install fusepy")


class LazyMount:
    """A mounted :mod:`_lazyfs` (see its docstring for the control commands)."""

    def __init__(self, mountpoint: pathlib.Path, proc: subprocess.Popen[bytes]) -> None:
        self.path = mountpoint
        self.proc = proc

    def control(self, command: str) -> None:
        """Run a control command (``powerloss``, ``fsync_eio N``, ``reset_counters``)."""
        with open(self.path / ".lazyfs", "w") as f:
            f.write(command + "\n")

    def power_loss(self) -> None:
        """Drop everything not fsynced."""
        self.control("powerloss")

    def power_loss_torn(self) -> None:
        """Drop everything not fsynced, except a random part of unsynced appends."""
        self._seed = getattr(self, "_seed", 0) + 1
        self.control(f"powerloss {self._seed}")

    def counters(self) -> dict[str, int]:
        """The filesystem's counters (fsync, fsyncdir, fsync_eio, fsync_after_eio...)."""
        with open(self.path / ".lazyfs") as f:
            data: dict[str, int] = json.loads(f.read())
            return data


@contextlib.contextmanager
def lazy_mount(mountpoint: pathlib.Path, *, threads: bool = False) -> Iterator[LazyMount]:
    """Mount the lazy FUSE filesystem on ``mountpoint`` (a subprocess), unmount after;
    ``threads``: requests served in parallel (for ``fsync_delay``)."""
    require_fuse()
    mountpoint.mkdir(parents=True, exist_ok=True)
    log = open(mountpoint.with_name(mountpoint.name + ".fuse.log"), "wb")  # noqa: SIM115
    proc = subprocess.Popen(
        [sys.executable, str(LAZYFS), str(mountpoint), *(["--threads"] if threads else [])],
        stdout=log,
        stderr=subprocess.STDOUT,
        cwd=str(REPO),
    )
    try:

        def not_mounted() -> str:
            log.flush()
            out = mountpoint.with_name(mountpoint.name + ".fuse.log").read_text()
            return f"the lazy FUSE filesystem did not mount ({proc.poll()}): {out}"

        def mounted() -> bool:
            if os.path.ismount(mountpoint):
                return True
            if proc.poll() is not None:
                pytest.fail(not_mounted())
            return False

        wait_until(mounted, timeout=20, interval=0.02, message=not_mounted)
        yield LazyMount(mountpoint, proc)
    finally:
        subprocess.run(
            ["fusermount", "-u", "-z", str(mountpoint)], check=False, capture_output=True
        )
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()  # our own FUSE server, by its Popen handle
            proc.wait()
        log.close()


@contextlib.contextmanager
def tmpfs_mount(mountpoint: pathlib.Path, size: str) -> Iterator[pathlib.Path]:
    """Mount a tmpfs of ``size`` (e.g. "2m") on ``mountpoint``; unmount after."""
    require_root("the disk-full test (tmpfs)")
    mountpoint.mkdir(parents=True, exist_ok=True)
    r = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(mountpoint)],
        capture_output=True,
        text=True,
        check=False,
    )
    if r.returncode != 0:
        pytest.fail(f"cannot mount a tmpfs on {mountpoint}: {r.stderr.strip()}")
    try:
        yield mountpoint
    finally:
        r = subprocess.run(["umount", str(mountpoint)], capture_output=True, check=False)
        if r.returncode != 0:
            subprocess.run(["umount", "-l", str(mountpoint)], capture_output=True, check=False)
