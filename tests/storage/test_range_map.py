"""``RangeMap``: runs of offsets with a value, checked against a plain dict per offset
(a hypothesis state machine), and the cases that split runs."""

from __future__ import annotations

import itertools

from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule

from seglog.storage import RangeMap
from seglog.storage.log.range_map import runs_of


def test_cut_splits_runs_and_reports_new_keys() -> None:
    m: RangeMap[str] = RangeMap()
    m.add(10, 19, "a")
    m.add(30, 39, "b")
    removed, new = m.cut(15, 32)
    assert removed == [(15, 19, "a"), (30, 32, "b")]
    assert new == [(33, 39, "b")]
    assert list(m) == [(10, 14, "a"), (33, 39, "b")]
    assert len(m) == 12
    removed, new = m.cut(11, 12)  # a hole: the right remnant gets key 13
    assert (removed, new) == ([(11, 12, "a")], [(13, 14, "a")])
    assert list(m) == [(10, 10, "a"), (13, 14, "a"), (33, 39, "b")]
    assert m.run_at(13) == (14, "a")
    assert m.run_at(11) is None
    assert m.find(34) == (33, 39, "b")
    assert m.find(20) is None
    assert m.overlapping(0, 13) == [(10, 10, "a"), (13, 13, "a")]
    assert m.cut(100, 200) == ([], [])


def test_runs_of() -> None:
    assert runs_of([5, 3, 4, 9, 9, 1]) == [(1, 1), (3, 5), (9, 9)]
    assert runs_of([]) == []


class RangeMapMachine(RuleBasedStateMachine):
    """Every operation applied to a RangeMap and to a dict offset -> value agree."""

    def __init__(self) -> None:
        super().__init__()
        self.m: RangeMap[int] = RangeMap()
        self.model: dict[int, int] = {}

    @rule(first=st.integers(0, 60), size=st.integers(1, 12), value=st.integers(0, 3))
    def add(self, first: int, size: int, value: int) -> None:
        last = first + size - 1
        self.m.cut(first, last)
        self.m.add(first, last, value)
        for o in range(first, last + 1):
            self.model[o] = value

    @rule(first=st.integers(-5, 70), size=st.integers(1, 20))
    def cut(self, first: int, size: int) -> None:
        last = first + size - 1
        removed, new = self.m.cut(first, last)
        expected = {o: v for o, v in self.model.items() if first <= o <= last}
        assert {o: v for f, t, v in removed for o in range(f, t + 1)} == expected
        for o in expected:
            del self.model[o]
        for f, t, v in new:
            assert f == last + 1
            assert all(self.model[o] == v for o in range(f, t + 1))

    @rule(first=st.integers(-5, 70), size=st.integers(1, 20))
    def overlapping(self, first: int, size: int) -> None:
        last = first + size - 1
        got = {o: v for f, t, v in self.m.overlapping(first, last) for o in range(f, t + 1)}
        assert got == {o: v for o, v in self.model.items() if first <= o <= last}

    @invariant()
    def agrees(self) -> None:
        assert dict(self.m.items()) == self.model
        assert len(self.m) == len(self.model)
        assert self.m.first() == min(self.model, default=None)
        runs = list(self.m)
        assert all(f <= t for f, t, _ in runs)
        assert all(a[1] < b[0] for a, b in itertools.pairwise(runs))
        for o, v in self.model.items():
            found = self.m.find(o)
            assert found is not None
            assert found[0] <= o <= found[1]
            assert found[2] == v


RangeMapMachine.TestCase.settings = settings(max_examples=60, stateful_step_count=30, deadline=None)
test_range_map_model = RangeMapMachine.TestCase
