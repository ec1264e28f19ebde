"""A clock the subscription tests move by hand (``fake_clock`` fixture, in conftest.py):
ack-wait deadlines and redeliveries follow it instead of the monotonic clock."""

from __future__ import annotations

import pytest

from seglog.storage.log import subscription as subscription_module

__all__ = ["FakeClock", "fake_clock"]


class FakeClock:
    """Monotonic seconds the test moves by hand (ack-wait deadlines use it)."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now

    def advance_ms(self, ms: int) -> None:
        self.now += ms / 1000.0


@pytest.fixture
def fake_clock(monkeypatch: pytest.MonkeyPatch) -> FakeClock:
    """The subscription module's clock, replaced for the test."""
    fake = FakeClock()
    monkeypatch.setattr(subscription_module, "clock", fake)
    return fake
