"""The web console in a real browser: Playwright driving Debian's chromium
(``/usr/bin/chromium``; ``.ci/run`` installs it) against ``seglog console`` and a live
``seglog serve`` with data. Each page loads; a click goes from the topic list to a message;
the lag shown equals the group's real lag; screenshots land in the test's directory (and
in ``docs/`` when ``SEGLOG_CONSOLE_SCREENSHOTS=1``)."""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from tests._wait import wait_until

from seglog.broker import BrokerProcess, free_port, start_broker

CHROMIUM = "/usr/bin/chromium"
SEGLOG = str(Path(sys.executable).with_name("seglog"))
DOCS = Path(__file__).resolve().parents[2] / "docs"
ARGS = [
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
    "--disable-component-update", "--disable-sync", "--no-first-run",
]  # fmt: skip


@pytest.fixture(scope="module")
def live(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    """A broker with an ``orders`` topic (JSON values, a binary one, headers), a group
    that consumed part of it, and a console process on a free port."""
    if shutil.which(CHROMIUM) is None:
        pytest.fail(f"{CHROMIUM} is missing: apt-get install chromium (see .ci/run)")
    work = tmp_path_factory.mktemp("console")
    broker: BrokerProcess = start_broker(work / "data")
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.create_topics([NewTopic("orders", 2)])["orders"].result(15)
    producer = Producer({"bootstrap.servers": broker.bootstrap})
    for i in range(30):
        value = json.dumps({"order": i, "item": f"book-{i}"}).encode()
        producer.produce("orders", key=f"k{i}".encode(), value=value, partition=i % 2,
                         headers=[("source", b"test")])  # fmt: skip
    producer.produce("orders", key=b"bin", value=b"\x00\xff\x10", partition=0)
    assert producer.flush(15) == 0
    consumer = Consumer(
        {"bootstrap.servers": broker.bootstrap, "group.id": "billing", "enable.auto.commit": False}
    )
    consumer.commit(
        offsets=[TopicPartition("orders", 0, 5), TopicPartition("orders", 1, 12)],
        asynchronous=False,
    )
    consumer.close()
    port = free_port()
    console = subprocess.Popen(
        [SEGLOG, "console", "-b", broker.bootstrap, "--listen", f"127.0.0.1:{port}"],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
    )
    url = f"http://127.0.0.1:{port}"

    def not_started() -> str:
        out = console.stdout.read().decode() if console.stdout else ""
        return f"console did not start: {out}"

    def serving() -> bool:
        assert console.poll() is None, not_started()
        with urllib.request.urlopen(f"{url}/api/overview", timeout=5) as resp:
            return resp.status == 200

    # polling for the server to come up, not deciding an outcome
    wait_until(serving, interval=0.2, message=not_started, ignore=(OSError,))
    try:
        yield {"url": url, "broker": broker, "shots": work}
    finally:
        console.send_signal(signal.SIGINT)
        console.wait(30)
        broker.stop()


@pytest.fixture(scope="module")
def page(live: dict[str, Any]) -> Iterator[Any]:
    from playwright.sync_api import sync_playwright  # noqa: PLC0415

    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        try:
            yield browser.new_page(viewport={"width": 1100, "height": 800})
        finally:
            browser.close()


def _shot(page: Any, live: dict[str, Any], name: str) -> None:
    page.screenshot(path=str(live["shots"] / f"console-{name}.png"), full_page=True)
    if os.environ.get("SEGLOG_CONSOLE_SCREENSHOTS") == "1":
        page.screenshot(path=str(DOCS / f"console-{name}.png"), full_page=True)


def test_overview_with_live_chart(page: Any, live: dict[str, Any]) -> None:
    page.goto(live["url"] + "/")
    assert page.locator("#overview").inner_text().count("orders") == 0  # counts, not names
    cells = page.locator("#overview td").all_inner_texts()
    assert cells[3] == "2"  # topics: orders and __consumer_offsets
    headers = page.locator("#overview th").all_inner_texts()
    assert headers[-1] == "console up"  # another process's broker: its uptime is unknown
    assert re.fullmatch(r"(\d+ d )?\d\d:\d\d:\d\d", cells[-1])
    page.wait_for_selector("#throughput canvas", timeout=15000)  # uPlot drew its chart
    _shot(page, live, "overview")


def test_click_from_topics_to_a_message(page: Any, live: dict[str, Any]) -> None:
    page.goto(live["url"] + "/topics")
    row = page.locator("#topics tr", has_text="orders")
    assert "31" in row.inner_text()  # records in the topic
    row.locator("a").click()
    page.wait_for_selector("#partitions")
    assert "retention.ms" in page.locator("#configs").inner_text()
    page.locator("#partitions a", has_text="messages").first.click()
    page.wait_for_selector("#messages")
    page.goto(page.url + "&offset=0&format=json")
    values = page.locator("#messages pre.value").all_inner_texts()
    assert json.loads(values[0]) == {"item": "book-0", "order": 0}
    assert "source=test" in page.locator("#messages").inner_text()
    _shot(page, live, "messages")
    assert len(values) == 16  # partition 0: 15 orders and one binary record
    page.locator("#next").click()  # paging: offset 16 is the log end, nothing more
    page.wait_for_selector("#messages")
    assert page.locator("#messages pre.value").count() == 0
    page.goto(live["url"] + "/topics/orders/messages?partition=0&offset=15&format=hex")
    assert "00 ff 10" in page.locator("#messages").inner_text()  # the binary value


def test_group_lag_equals_the_real_lag(page: Any, live: dict[str, Any]) -> None:
    page.goto(live["url"] + "/groups")
    page.locator("#groups a", has_text="billing").click()
    page.wait_for_selector("#lag")
    shown = [int(x) for x in page.locator("#lag .lag").all_inner_texts()]
    admin = AdminClient({"bootstrap.servers": live["broker"].bootstrap})
    from confluent_kafka.admin import OffsetSpec  # noqa: PLC0415

    ends = admin.list_offsets({TopicPartition("orders", p): OffsetSpec.latest() for p in (0, 1)})
    real = {tp.partition: f.result(15).offset for tp, f in ends.items()}
    assert shown == [real[0] - 5, real[1] - 12]
    assert page.locator("#state").inner_text() == "EMPTY"
    _shot(page, live, "group")


def _api(live: dict[str, Any], path: str) -> Any:
    with urllib.request.urlopen(live["url"] + "/api/" + path, timeout=30) as resp:
        return json.loads(resp.read())


def test_groups_page_shows_each_group_type(page: Any, live: dict[str, Any]) -> None:
    """A share group (raw KIP-932 requests) is listed beside the classic ``billing`` with
    its type, and its page shows its member and share-partition start offsets, whose lag
    is log end - start."""
    from tests.broker._share import earliest, heartbeat, share_ack, share_fetch  # noqa: PLC0415
    from tests.broker._wire import Wire, ensure_topic  # noqa: PLC0415

    bootstrap, group = live["broker"].bootstrap, "audit"
    earliest(bootstrap, group)
    with Wire(bootstrap) as w:
        tid = ensure_topic(w, "orders")
        assert heartbeat(w, group, "auditor", 0, ["orders"]).error_code == 0
        fetched = share_fetch(w, group, "auditor", 0, tid, max_records=4)
        assert fetched.responses[0].partitions[0].acquired_records[0].first_offset == 0
        assert share_ack(w, group, "auditor", 1, tid, [(0, 3, [1, 1, 1, 1])]).error_code == 0
        rows = {r["group"]: (r["type"], r["state"]) for r in _api(live, "groups")}
        assert rows["billing"] == ("classic", "EMPTY")
        assert rows[group] == ("share", "STABLE")
        doc = _api(live, f"groups/{group}")
        assert [m["member_id"] for m in doc["members"]] == ["auditor"]
        # partition 0 of orders: 15 JSON records and the binary one
        assert [(p["partition"], p["start_offset"], p["log_end_offset"], p["lag"])
                for p in doc["partitions"]] == [(0, 4, 16, 12)]  # fmt: skip
        page.goto(live["url"] + "/groups")
        listed = page.locator("#groups").inner_text()
        assert re.search(rf"{group}\s+share\s+STABLE", listed), listed
        assert re.search(r"billing\s+classic\s+EMPTY", listed), listed
        page.locator("#groups a", has_text=group).click()
        page.wait_for_selector("#lag")
        assert page.locator("#type").inner_text() == "share"
        assert [int(x) for x in page.locator("#lag .lag").all_inner_texts()] == [12]
        assert heartbeat(w, group, "auditor", -1).error_code == 0


def test_transactions_page_shows_ongoing_transactions(page: Any, live: dict[str, Any]) -> None:
    """An open transaction is listed with its state, producer and partitions (API and
    page); once it ends it is gone."""
    from tests.broker._txn import add, end, init  # noqa: PLC0415
    from tests.broker._wire import Wire, ensure_topic  # noqa: PLC0415

    with Wire(live["broker"].bootstrap) as w:
        ensure_topic(w, "orders")
        r = init(w, "console-tx")
        pid, epoch = r.producer_id, r.producer_epoch
        assert add(w, "console-tx", pid, epoch, "orders") == 0
        rows = _api(live, "transactions")
        assert [(t["transactional_id"], t["state"], t["producer_id"], t["partitions"])
                for t in rows] == [("console-tx", "Ongoing", pid, ["orders-0"])]  # fmt: skip
        page.goto(live["url"] + "/transactions")
        listed = page.locator("#transactions").inner_text()
        assert re.search(rf"console-tx\s+Ongoing\s+{pid}", listed), listed
        _shot(page, live, "transactions")
        assert end(w, "console-tx", pid, epoch, False) == 0
        assert _api(live, "transactions") == []


def test_serve_console_listen(tmp_path: Path) -> None:
    port, console_port = free_port(), free_port()
    broker = start_broker(
        tmp_path / "data", port=port, extra_args=["--console-listen", f"127.0.0.1:{console_port}"]
    )
    try:

        def overview() -> Any:
            url = f"http://127.0.0.1:{console_port}/api/overview"
            with urllib.request.urlopen(url, timeout=5) as resp:
                return json.loads(resp.read())

        # polling for the server to come up
        doc = wait_until(overview, interval=0.2, message=broker.log_text, ignore=(OSError,))
        assert [b["port"] for b in doc["brokers"]] == [port]  # a client of its own broker
        # in the broker's process the overview knows the broker's uptime (not only its own)
        assert doc["broker_uptime_s"] is not None
        assert doc["broker_uptime_s"] >= doc["console_uptime_s"]
    finally:
        assert broker.stop() == 0
