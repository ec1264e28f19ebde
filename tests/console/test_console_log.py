"""``seglog serve --console-listen``: the console's own Kafka clients leave no librdkafka
lines in the broker's log, neither while the broker starts (the console starts once the
broker listens) nor when it stops (its clients log only critical lines)."""

from __future__ import annotations

import json
import urllib.request
from pathlib import Path

import pytest
from tests._wait import wait_until

from seglog.broker import free_port, start_broker

pytest.importorskip("uvicorn", reason="the console extra (starlette, uvicorn)")


def test_console_listen_leaves_no_librdkafka_lines_in_the_broker_log(tmp_path: Path) -> None:
    port, console_port = free_port(), free_port()
    broker = start_broker(
        tmp_path / "data", port=port, extra_args=["--console-listen", f"127.0.0.1:{console_port}"]
    )
    try:

        def overview() -> bool:  # the console's admin client connects for the first one
            url = f"http://127.0.0.1:{console_port}/api/overview"
            with urllib.request.urlopen(url, timeout=5) as resp:
                return bool(json.loads(resp.read())["brokers"])

        wait_until(overview, timeout=30, interval=0.2, ignore=(OSError,), message=broker.log_text)
    finally:
        assert broker.stop() == 0
    log = broker.log_text()
    assert "seglog broker stopped" in log
    assert "rdkafka" not in log, log
