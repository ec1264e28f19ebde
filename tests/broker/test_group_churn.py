"""A short run of ``scripts/group_churn.py``: members joining, leaving and killed, static
and dynamic, a producer writing, the broker killed with SIGKILL and restarted; committed
offsets never go backwards and nothing acknowledged is lost."""

from __future__ import annotations

import pytest
from scripts.group_churn import run


@pytest.mark.slow  # 25 s of churn
def test_group_churn_short() -> None:
    figures = run(seconds=25, broker_kill_s=8)
    print(figures)
    assert figures["broker_kills"] >= 2
    assert figures["member_kills"] >= 1
    assert figures["acknowledged"] > 0
    committed = figures["committed"]
    assert isinstance(committed, dict)
    assert committed  # the group committed through the churn
