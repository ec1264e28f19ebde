"""Crash-test writers: a fork server ("zygote") whose children publish until SIGKILLed.

Starting a Python that imports seglog costs ~0.5 s on the CI machine; forking a process
that already did costs ~2 ms, so hundreds of kill -9 cycles stay cheap. The zygote is
single-threaded (it never opens a log itself), so fork is safe.

Protocol (text lines on the zygote's stdin/stdout):

- test → zygote: ``run <json>`` with ``{"path", "config": {LogConfig fields},
  "seed", "max_batch"}``;
- child → test: ``pid <pid>``, then ``ack <start> <end>`` after every ``publish`` that
  returned (offsets ``[start, end)`` acknowledged), ``err <text>`` if it fails;
- zygote → test: ``exit <pid> <wait status>`` once the child is reaped.

Every message is a pure function of its offset (:func:`expected_message`), so a verifier
can check any stored message byte for byte without knowing how batches were cut.
"""

from __future__ import annotations

import builtins
import json
import os
import random
import signal
import sys

import seglog.storage as st

for _name in st.__all__:  # the names are imported lazily: import them all before any fork
    getattr(st, _name)

BASE_TS = 1_700_000_000_000


def expected_message(offset: int) -> tuple[bytes, bytes, int]:
    """``(key, value, timestamp ms)`` of the message a crash writer stores at ``offset``:
    values of 1-300 bytes, one in 40 of 20-100 KiB (large batches make SIGKILL land
    inside a write, leaving torn tails)."""
    rng = random.Random(offset * 7919 + 17)
    size = rng.randint(20_000, 100_000) if rng.random() < 0.025 else rng.randint(1, 300)
    return b"k%d" % (offset % 97), rng.randbytes(size), BASE_TS + offset


def _child(spec: dict[str, object]) -> None:
    Message, open_log = st.Message, st.open_log
    out = sys.stdout.fileno()
    os.write(out, b"pid %d\n" % os.getpid())
    try:
        config = dict(spec["config"])  # type: ignore[call-overload]
        log = open_log(str(spec["path"]), create=True, **config)
        rng = random.Random(int(spec["seed"]))  # type: ignore[call-overload]
        max_batch = int(spec.get("max_batch", 40))  # type: ignore[call-overload]
        while True:
            start = log.next_offset()
            n = rng.randint(1, max_batch)
            msgs = []
            for o in range(start, start + n):
                key, value, ts = expected_message(o)
                msgs.append(Message(key=key, value=value, timestamp=ts))
            end = log.publish(msgs)
            os.write(out, b"ack %d %d\n" % (start, end))
    except BaseException as e:
        os.write(out, ("err " + repr(e).replace("\n", " ") + "\n").encode())
        os._exit(3)


_MUTATING = (
    "rename",
    "replace",
    "unlink",
    "remove",
    "rmdir",
    "mkdir",
    "write",
    "pwrite",
    "ftruncate",
    "truncate",
    "fsync",
    "fdatasync",
    "link",
    "sendfile",
    "copy_file_range",
    "open",
)
_WRITE_FLAGS = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_TRUNC | os.O_APPEND


def _kill_at(n: int, *, writes: bool) -> None:
    """SIGKILL this process just before its ``n``-th file-mutating call (os functions
    above, ``os.open``/``open`` only when opening for writing; ``write``/``pwrite`` only
    when ``writes``): a crash at every step."""
    count = [0]

    def tick() -> None:
        count[0] += 1
        if count[0] == n:
            os.kill(os.getpid(), signal.SIGKILL)

    def wrap(name: str, real):  # type: ignore[no-untyped-def]
        def wrapper(*args, **kwargs):  # type: ignore[no-untyped-def]
            if name != "open" or (len(args) > 1 and args[1] & _WRITE_FLAGS):
                tick()
            return real(*args, **kwargs)

        return wrapper

    for name in _MUTATING:
        if not writes and name in ("write", "pwrite"):
            continue
        if hasattr(os, name):
            setattr(os, name, wrap(name, getattr(os, name)))
    real_open = builtins.open

    def open_(file, mode="r", *args, **kwargs):  # type: ignore[no-untyped-def]
        if any(c in mode for c in "wax+"):
            tick()
        return real_open(file, mode, *args, **kwargs)

    builtins.open = open_
    _STEPS.append(count)


_STEPS: list[list[int]] = []


def _op_child(spec: dict[str, object]) -> None:
    """Open the log, arm the crash point, run one maintenance operation, report ``done``
    (then exit without closing: a crash right after it returned)."""
    out = sys.stdout.fileno()
    os.write(out, b"pid %d\n" % os.getpid())
    try:
        log = st.Log.open(str(spec["path"]), st.LogConfig(**dict(spec["config"])))  # type: ignore[call-overload]
        args = dict(spec.get("args", {}))  # type: ignore[call-overload]
        op = str(spec["op"])
        _kill_at(int(spec["kill_at"]), writes=bool(spec.get("writes", False)))  # type: ignore[call-overload]
        if op == "compact":
            st.compact(log, **args)
        elif op == "delete_offsets":
            st.delete_offsets(log, args["offsets"])
        elif op == "trim_by_offset":
            st.trim_by_offset(log, args["before"])
        elif op == "trim_by_count":
            st.trim_by_count(log, args["max_messages"])
        elif op == "trim_by_size":
            st.trim_by_size(log, args["max_bytes"])
        elif op == "backup":
            st.backup(log, args["dest"])
        elif op == "snapshot":
            st.snapshot(log, args["out"])
        elif op == "restore":
            st.restore(args["src"], args["dest"])
        else:
            raise ValueError(op)
        os.write(out, b"done %d\n" % _STEPS[-1][0])
        os._exit(0)
    except BaseException as e:
        os.write(out, ("err " + repr(e).replace("\n", " ") + "\n").encode())
        os._exit(3)


def main() -> None:
    """Serve ``run``/``op`` requests on stdin until EOF (seglog is imported once, above,
    before any fork)."""
    for line in sys.stdin:
        cmd, _, arg = line.strip().partition(" ")
        if cmd not in ("run", "op"):
            continue
        spec = json.loads(arg)
        sys.stdout.flush()
        pid = os.fork()
        if pid == 0:
            try:
                (_child if cmd == "run" else _op_child)(spec)
            finally:
                os._exit(4)
        _, status = os.waitpid(pid, 0)
        os.write(sys.stdout.fileno(), b"exit %d %d\n" % (pid, status))


if __name__ == "__main__":
    main()
