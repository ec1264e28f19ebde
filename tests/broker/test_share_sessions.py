"""The share session cache on its own (``coordinator/share_sessions.py``): epochs in
sequence, Kafka's error codes, the session limit, the final epoch without a session, and
the order in which waiting fetches of one group take records (least recently served
first)."""

from __future__ import annotations

from seglog.broker.coordinator.share_sessions import ShareSessionCache

SHARE_SESSION_NOT_FOUND, INVALID_SHARE_SESSION_EPOCH, SHARE_SESSION_LIMIT_REACHED = 122, 123, 133


def test_epochs_follow_one_another() -> None:
    cache = ShareSessionCache(max_sessions=2)
    assert cache.check("g", "a", 1) == (SHARE_SESSION_NOT_FOUND, None)
    code, session = cache.open("g", "a")
    assert code == 0
    assert session is not None
    assert session.epoch == 1  # a new session expects epoch 1 next
    assert cache.check("g", "a", 2)[0] == INVALID_SHARE_SESSION_EPOCH
    assert cache.check("g", "a", 1) == (0, session)
    session.advance()
    assert cache.check("g", "a", 2) == (0, session)
    session.epoch = (1 << 31) - 1
    session.advance()
    assert session.epoch == 1  # wraps to 1, never 0 (which opens) or -1 (which closes)


def test_limit_and_final_epoch() -> None:
    cache = ShareSessionCache(max_sessions=1)
    assert cache.open("g", "a")[0] == 0
    assert cache.open("g", "b") == (SHARE_SESSION_LIMIT_REACHED, None)
    assert cache.open("g", "a")[0] == 0  # replacing one's own session is not one more
    assert cache.close("g", "a") is not None
    code, detached = cache.check("g", "a", -1)  # final acknowledgements need no session
    assert code == 0
    assert detached is not None
    assert cache.get("g", "a") is None
    assert len(cache) == 0


def test_least_recently_served_waiting_fetch_goes_first() -> None:
    cache = ShareSessionCache(max_sessions=10)
    sessions = [cache.open(g, m)[1] for g, m in (("g", "a"), ("g", "b"), ("g", "c"), ("h", "x"))]
    a, b, c, other = (s for s in sessions if s is not None)
    for s, served in ((a, 30.0), (b, 10.0), (c, 20.0), (other, 0.0)):
        s.last_served, s.waiting = served, True
    assert [cache.turn(s) for s in (a, b, c)] == [2, 0, 1]  # b, then c, then a
    b.waiting = False  # only waiting fetches of the same group count
    assert [cache.turn(s) for s in (a, c)] == [1, 0]
    assert cache.turn(other) == 0
