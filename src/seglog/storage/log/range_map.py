"""Disjoint runs of consecutive offsets, each carrying one value: how in-flight records
are tracked by durable subscriptions and the broker's share partitions, by range rather
than by record (Kafka's ``SharePartition`` keeps its in-flight batches the same way: one
state and delivery count per offset range, split only when part of it changes).

A run is ``(first, last, value)``, ``first <= last``, inclusive. :meth:`RangeMap.cut`
removes offsets and splits the runs it cuts through (the left remnant keeps its key, the
right one gets a new key: both keep the value); :meth:`RangeMap.add` inserts a run where
nothing is (the caller cuts first). Costs: O(log R + k) to find, O(R) worst case to insert
or delete a key (a list insert), R runs and k runs touched: R stays small, since one run
is typically one fetch's worth of records.

Not thread-safe: its owner's lock guards it.
"""

from __future__ import annotations

import bisect
from collections.abc import Iterable, Iterator
from typing import Generic, TypeVar

__all__ = ["RangeMap", "runs_of"]

V = TypeVar("V")


def runs_of(offsets: Iterable[int]) -> list[tuple[int, int]]:
    """The runs of consecutive values of ``offsets`` (any order, duplicates allowed):
    ``[(first, last), ...]`` ascending."""
    out: list[tuple[int, int]] = []
    for o in sorted(set(offsets)):
        if out and out[-1][1] == o - 1:
            out[-1] = (out[-1][0], o)
        else:
            out.append((o, o))
    return out


class RangeMap(Generic[V]):
    """Offset -> value, stored as disjoint runs ``(first, last, value)``."""

    __slots__ = ("_firsts", "_runs", "count")

    def __init__(self) -> None:
        self._firsts: list[int] = []
        """The runs' first offsets, ascending."""
        self._runs: dict[int, tuple[int, V]] = {}
        """first -> (last, value)."""
        self.count = 0
        """How many offsets the runs hold."""

    def __len__(self) -> int:
        return self.count

    def __bool__(self) -> bool:
        return self.count > 0

    def __iter__(self) -> Iterator[tuple[int, int, V]]:
        """The runs, ascending."""
        runs = self._runs
        for first in list(self._firsts):
            last, value = runs[first]
            yield first, last, value

    def first(self) -> int | None:
        """The lowest offset held, None when empty."""
        return self._firsts[0] if self._firsts else None

    def run_at(self, first: int) -> tuple[int, V] | None:
        """``(last, value)`` of the run starting exactly at ``first``, else None."""
        return self._runs.get(first)

    def find(self, offset: int) -> tuple[int, int, V] | None:
        """The run holding ``offset``, else None."""
        i = bisect.bisect_right(self._firsts, offset) - 1
        if i < 0:
            return None
        first = self._firsts[i]
        last, value = self._runs[first]
        return (first, last, value) if offset <= last else None

    def overlapping(self, first: int, last: int) -> list[tuple[int, int, V]]:
        """The parts of runs within ``[first, last]``, clipped to it, ascending."""
        firsts, runs = self._firsts, self._runs
        i = max(bisect.bisect_right(firsts, first) - 1, 0)
        out: list[tuple[int, int, V]] = []
        while i < len(firsts) and firsts[i] <= last:
            f = firsts[i]
            run_last, value = runs[f]
            if run_last >= first:
                out.append((max(f, first), min(run_last, last), value))
            i += 1
        return out

    def add(self, first: int, last: int, value: V) -> None:
        """Insert a run over offsets no run holds (ValueError when ``first > last``; the
        caller guarantees the offsets are free, e.g. by :meth:`cut`)."""
        if first > last:
            raise ValueError(f"empty run {first}..{last}")
        firsts = self._firsts
        if not firsts or first > firsts[-1]:
            firsts.append(first)
        else:
            bisect.insort(firsts, first)
        self._runs[first] = (last, value)
        self.count += last - first + 1

    def cut(
        self, first: int, last: int
    ) -> tuple[list[tuple[int, int, V]], list[tuple[int, int, V]]]:
        """Remove offsets ``first..last``: ``(removed, new)`` where ``removed`` are the
        parts taken out (ascending) and ``new`` the right remnants that got a new key
        (a run cut in its middle or at its start keeps its value past ``last``)."""
        removed: list[tuple[int, int, V]] = []
        new: list[tuple[int, int, V]] = []
        if first > last or not self._firsts:
            return removed, new
        firsts, runs = self._firsts, self._runs
        i = max(bisect.bisect_right(firsts, first) - 1, 0)
        while i < len(firsts) and firsts[i] <= last:
            f = firsts[i]
            run_last, value = runs[f]
            if run_last < first:
                i += 1
                continue
            lo, hi = max(f, first), min(run_last, last)
            removed.append((lo, hi, value))
            self.count -= hi - lo + 1
            if lo > f:  # a left remnant keeps the key
                runs[f] = (lo - 1, value)
                i += 1
            else:
                del runs[f]
                del firsts[i]
            if hi < run_last:  # a right remnant: a new key, after the cut
                runs[hi + 1] = (run_last, value)
                firsts.insert(i, hi + 1)
                new.append((hi + 1, run_last, value))
                break
        return removed, new

    def items(self) -> Iterator[tuple[int, V]]:
        """Every ``(offset, value)``, ascending (O(count): for reports and tests)."""
        for first, last, value in self:
            for o in range(first, last + 1):
                yield o, value
