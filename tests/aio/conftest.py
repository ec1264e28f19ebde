"""The aio tests take the storage tests' ``make_log`` (each test on both backends)."""

from __future__ import annotations

from tests._logs import backend, make_log

__all__ = ["backend", "make_log"]
