"""``seglog transactions list|describe|abort`` against a real broker, run as a user runs
them: a hanging transaction found with ``list``/``describe`` and aborted by its start
offset, after which read_committed readers move past it."""

from __future__ import annotations

from tests.broker._txn import add, init, latest, send, txn_batch
from tests.broker._wire import Wire, ensure_topic

from .conftest import Seglog


def test_list_describe_abort(seglog: Seglog, topic: str) -> None:
    with Wire(seglog.broker) as w:
        ensure_topic(w, topic)
        r = init(w, "cli-tx")
        pid, epoch = r.producer_id, r.producer_epoch
        assert add(w, "cli-tx", pid, epoch, topic) == 0
        assert send(w, topic, txn_batch(pid, epoch, 0, [b"hang"])) == 0
        assert latest(w, topic, 1) == 0
    listed = seglog.json("transactions", "list", "--state", "Ongoing")
    assert {"transactional_id": "cli-tx", "producer_id": pid, "state": "Ongoing"} in listed
    assert seglog.json("transactions", "list", "--producer-id", str(pid + 999)) == []
    described = seglog.json("transactions", "describe", "--transactional-id", "cli-tx")
    assert described["state"] == "Ongoing"
    assert (described["producer_id"], described["producer_epoch"]) == (pid, epoch)
    assert described["partitions"] == [f"{topic}-0"]
    table = seglog("transactions", "describe", "--transactional-id", "cli-tx").stdout.decode()
    assert "Ongoing" in table
    missing = seglog("transactions", "describe", "--transactional-id", "nope", check=False)
    assert missing.returncode == 1
    assert b"error 105" in missing.stderr
    wrong = seglog(
        "transactions", "abort", "--topic", topic, "--partition", "0", "--start-offset", "7",
        check=False,
    )  # fmt: skip
    assert wrong.returncode == 1
    done = seglog("transactions", "abort", "--topic", topic, "--partition", "0",
                  "--start-offset", "0")  # fmt: skip
    assert b"aborted" in done.stdout
    with Wire(seglog.broker) as w:
        assert latest(w, topic, 1) == 2  # the hanging transaction no longer holds readers
    usage = seglog("transactions", "abort", "--topic", topic, "--partition", "0", check=False)
    assert usage.returncode == 2
