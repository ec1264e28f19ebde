"""Hypothesis state machine: appends, syncs, clean reopens and torn tails vs a model."""

from __future__ import annotations

import os
import pathlib
import shutil
import tempfile

from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule

from seglog.storage import Log, LogConfig
from seglog.storage.record.batch import parse_header

from ._batches import make_batch

CFG = LogConfig(segment_bytes=700, index_interval_bytes=120)


class LogMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.dir = pathlib.Path(tempfile.mkdtemp(prefix="seglog-hyp-"))
        self.log = Log.open(self.dir / "p", CFG, create=True)
        self.model: list[tuple[int, bytes]] = []  # (base offset, stored bytes after baseOffset)

    @rule(n=st.integers(1, 6), size=st.integers(1, 150), codec=st.sampled_from(["none", "lz4"]))
    def append(self, n: int, size: int, codec: str) -> None:
        batch = make_batch(n, value_size=size, codec=codec, tag=b"%d" % len(self.model))
        info = self.log.append(batch)
        assert info.base_offset == self.end
        self.model.append((info.base_offset, batch[8:]))

    @property
    def end(self) -> int:
        if not self.model:
            return 0
        base, rest = self.model[-1]
        return base + parse_header(b"\0" * 8 + rest).last_offset_delta + 1

    @rule()
    def sync(self) -> None:
        assert self.log.sync() == self.end

    @rule()
    def reopen(self) -> None:
        self.log.close()
        self.log = Log.open(self.dir / "p", CFG)

    @rule(cut=st.integers(1, 60))
    def crash_with_torn_tail(self, cut: int) -> None:
        self.log.sync()
        self.log.close()
        p = self.dir / "p"
        (p / ".clean_shutdown").unlink()
        last = max(n for n in os.listdir(p) if n.endswith(".log"))
        size = os.path.getsize(p / last)
        if self.model and size > 0:
            _base, rest = self.model[-1]
            cut = min(cut, len(rest) + 8 - 1)
            os.truncate(p / last, size - cut)
            self.model.pop()
        self.log = Log.open(p, CFG)

    @rule(data=st.data())
    def read(self, data: st.DataObject) -> None:
        self.log.sync()
        if not self.model:
            assert self.log.read(0, 100) == b""
            return
        i = data.draw(st.integers(0, len(self.model) - 1))
        base, rest = self.model[i]
        got = self.log.read(base, 1)
        assert parse_header(got).base_offset == base
        assert got[8:] == rest

    @invariant()
    def offsets(self) -> None:
        assert self.log.log_end_offset == self.end

    def teardown(self) -> None:
        self.log.close()
        shutil.rmtree(self.dir, ignore_errors=True)


LogMachine.TestCase.settings = settings(max_examples=20, stateful_step_count=25, deadline=None)
TestLogMachine = LogMachine.TestCase
