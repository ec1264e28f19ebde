"""Hypothesis state machine: the embedded API against a plain in-memory model.

Rules: publish, consume, get, get_by_key, offset_by_time, trim (by offset), compact,
delete by offsets, close/reopen, crash (no clean shutdown, torn tail of the last batch)
and recover. The model is a dict offset → message plus the log start and end offsets;
compaction and deletion only touch closed segments (never the active one), as their
contracts say. (tests/storage/test_stateful.py checks raw batches and offsets.)
"""

from __future__ import annotations

import os
import pathlib
import shutil
import tempfile

import pytest
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from seglog.errors import InvalidOffsetError, NotFoundError
from seglog.storage import Log, LogConfig, Message, compact, delete_offsets, trim_by_offset

from .conftest import record_figure

CFG = LogConfig(segment_bytes=600, index_interval_bytes=100, key_index=True)
KEYS = [b"a", b"b", b"c", b"d", b"e", b"f"]
Rec = tuple[bytes, bytes | None, int]  # key, value, timestamp
COUNTS: dict[str, int] = {}


def _count(name: str) -> None:
    COUNTS[name] = COUNTS.get(name, 0) + 1


class ModelMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        _count("examples")
        self.dir = pathlib.Path(
            tempfile.mkdtemp(
                prefix="seglog-model-", dir="/dev/shm" if os.path.isdir("/dev/shm") else None
            )
        )
        self.path = self.dir / "p"
        self.log = Log.open(self.path, CFG, create=True)
        self.model: dict[int, Rec] = {}
        self.start = 0
        self.end = 0
        self.ts = 10_000
        self.last_batch: list[int] = []  # offsets of the last publish (torn-tail rule)
        self.last_by_key: dict[bytes, int] = {}  # last offset ever published per key

    def teardown(self) -> None:
        self.log.close()
        shutil.rmtree(self.dir, ignore_errors=True)

    # -- helpers ---------------------------------------------------------------------------

    def _present(self, offset: int) -> list[int]:
        return sorted(o for o in self.model if o >= max(offset, self.start))

    def _active_base(self) -> int:
        return self.log.segments()[-1].base_offset

    # -- rules -----------------------------------------------------------------------------

    @rule(
        recs=st.lists(
            st.tuples(
                st.sampled_from(KEYS), st.one_of(st.none(), st.binary(min_size=0, max_size=40))
            ),
            min_size=1,
            max_size=6,
        )
    )
    def publish(self, recs: list[tuple[bytes, bytes | None]]) -> None:
        _count("publish")
        msgs = []
        for key, value in recs:
            self.ts += 1
            msgs.append(Message(key=key, value=value, timestamp=self.ts))
        nxt = self.log.publish(msgs)
        assert nxt == self.end + len(msgs)
        self.last_batch = list(range(self.end, nxt))
        for o, m in zip(self.last_batch, msgs, strict=True):
            assert m.key is not None
            self.model[o] = (m.key, m.value, m.timestamp)
            self.last_by_key[m.key] = o
        self.end = nxt

    @rule(data=st.data(), count=st.integers(1, 12))
    def consume(self, data: st.DataObject, count: int) -> None:
        _count("consume")
        offset = data.draw(st.integers(self.start, self.end))
        _, msgs = self.log.consume(offset, count)
        want = self._present(offset)[:count]
        assert [m.offset for m in msgs] == want
        for m in msgs:
            assert (m.key, m.value, m.timestamp) == self.model[m.offset]

    @rule(data=st.data())
    def get(self, data: st.DataObject) -> None:
        _count("get")
        offset = data.draw(st.integers(0, self.end + 1))
        if offset < self.start or offset >= self.end:
            with pytest.raises(InvalidOffsetError):
                self.log.get(offset)
        elif offset not in self.model:
            with pytest.raises(NotFoundError):
                self.log.get(offset)
        else:
            m = self.log.get(offset)
            assert (m.offset, m.key, m.value, m.timestamp) == (offset, *self.model[offset])

    @rule(key=st.sampled_from(KEYS))
    def get_by_key(self, key: bytes) -> None:
        _count("get_by_key")
        last = self.last_by_key.get(key)
        if last is None:
            with pytest.raises(NotFoundError):
                self.log.get_by_key(key)
        elif last >= 0 and last in self.model and last >= self.start:
            m = self.log.get_by_key(key)
            assert m.offset == last
            assert (m.key, m.value, m.timestamp) == self.model[last]
        # else: its last record was trimmed, compacted or deleted (no model claim)

    @rule(data=st.data())
    def offset_by_time(self, data: st.DataObject) -> None:
        _count("offset_by_time")
        t = data.draw(st.integers(9_990, self.ts + 2))
        want = next((o for o in self._present(self.start) if self.model[o][2] >= t), None)
        if want is None:
            with pytest.raises(NotFoundError):
                self.log.offset_by_time(t)
        else:
            assert self.log.offset_by_time(t) == (want, self.model[want][2])

    @rule(data=st.data())
    def trim(self, data: st.DataObject) -> None:
        _count("trim")
        before = data.draw(st.integers(self.start, self.end))
        trim_by_offset(self.log, before)
        for o in [o for o in self.model if o < before]:
            del self.model[o]
        self.start = max(self.start, before)

    @rule()
    def compact(self) -> None:
        _count("compact")
        active = self._active_base()
        compact(self.log, now_ms=10**13, delete_retention_ms=0)
        last_present: dict[bytes, int] = {}
        for o in sorted(self.model):
            last_present[self.model[o][0]] = o
        for o in [o for o in self.model if o < active]:
            key, value, _ = self.model[o]
            if last_present[key] != o or value is None:
                del self.model[o]

    @rule(data=st.data())
    def delete(self, data: st.DataObject) -> None:
        _count("delete")
        active = self._active_base()
        closed = [o for o in sorted(self.model) if o < active]
        if not closed:
            return
        doomed = data.draw(st.lists(st.sampled_from(closed), max_size=5, unique=True))
        removed = delete_offsets(self.log, doomed)
        assert sorted(removed.offsets) == sorted(doomed)
        for o in doomed:
            del self.model[o]

    @rule()
    def reopen(self) -> None:
        _count("reopen")
        self.log.close()
        self.log = Log.open(self.path, CFG)

    # tear only a batch wholly at or above the log start (tearing a batch below a trim
    # point would mean losing an acknowledged batch, which no crash does under fsync)
    @precondition(lambda self: bool(self.last_batch) and self.last_batch[0] >= self.start)
    @rule(cut=st.integers(1, 50))
    def crash_with_torn_tail(self, cut: int) -> None:
        """A crash tearing the last batch: it is lost (it was never acknowledged in the
        crash's story), everything before it stays."""
        _count("crash_with_torn_tail")
        self.log.close()
        (self.path / ".clean_shutdown").unlink()
        last = max(self.path.glob("*.log"))
        size = last.stat().st_size
        if size > 0 and int(last.name[:20]) <= self.last_batch[0]:
            os.truncate(last, max(size - cut, size - 60))  # inside the last batch
            for o in self.last_batch:
                self.model.pop(o, None)
            self.end = self.last_batch[0]
            for o in self.last_batch:  # those keys fall back to older offsets: no claim
                for k, last in list(self.last_by_key.items()):
                    if last == o:
                        self.last_by_key[k] = -1
        self.last_batch = []
        self.log = Log.open(self.path, CFG)

    @invariant()
    def offsets(self) -> None:
        assert self.log.log_end_offset == self.end
        assert self.log.log_start_offset == self.start


# moderate in the default suite; scripts/soak.py runs it with SEGLOG_MODEL_EXAMPLES=1000
ModelMachine.TestCase.settings = settings(
    max_examples=int(os.environ.get("SEGLOG_MODEL_EXAMPLES", "60")),
    stateful_step_count=40,
    deadline=None,
    print_blob=True,
)
TestModelMachine = ModelMachine.TestCase


@pytest.fixture(scope="module", autouse=True)
def _figure():  # type: ignore[no-untyped-def]
    yield
    rules = ", ".join(f"{k} {v}" for k, v in sorted(COUNTS.items()) if k != "examples")
    record_figure(
        f"model (hypothesis): {COUNTS.get('examples', 0)} runs against the in-memory model, "
        f"rules run: {rules}"
    )
