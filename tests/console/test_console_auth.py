"""The console behind the broker's authentication: on a SASL broker every page needs HTTP
Basic credentials that log in to the broker, and each person sees what the broker's ACLs
let that principal describe."""

from __future__ import annotations

import base64
import json
import signal
import subprocess
import sys
import urllib.error
import urllib.request
from pathlib import Path

from confluent_kafka.admin import (
    AclBinding,
    AclOperation,
    AclPermissionType,
    AdminClient,
    NewTopic,
    ResourcePatternType,
    ResourceType,
)
from tests._wait import wait_until

from seglog.broker import free_port, start_broker

SEGLOG = str(Path(sys.executable).with_name("seglog"))


def _get(url: str, user: str | None = None, password: str = "") -> tuple[int, bytes]:
    request = urllib.request.Request(url)
    if user is not None:
        token = base64.b64encode(f"{user}:{password}".encode()).decode()
        request.add_header("Authorization", f"Basic {token}")
    try:
        with urllib.request.urlopen(request, timeout=30) as resp:
            return resp.status, resp.read()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read()


def test_console_logs_in_to_the_broker(tmp_path: Path) -> None:
    data = tmp_path / "data"
    data.mkdir()
    for user, password in (("admin", "admin-pw"), ("alice", "alice-pw")):
        subprocess.run(
            [SEGLOG, "user", "add", user, "--data-dir", str(data), "--password", password],
            check=True,
            capture_output=True,
        )
    plain, sasl, web = free_port(), free_port(), free_port()
    broker = start_broker(
        data,
        port=plain,
        extra_args=[
            "--listeners",
            f"PLAINTEXT://127.0.0.1:{plain},SASL_PLAINTEXT://127.0.0.1:{sasl}",
            "--authorizer-class-name",
            "StandardAuthorizer",
            "--super-users",
            "User:admin",
        ],
    )
    admin_conf = {
        "bootstrap.servers": f"127.0.0.1:{sasl}",
        "security.protocol": "SASL_PLAINTEXT",
        "sasl.mechanism": "SCRAM-SHA-256",
        "sasl.username": "admin",
        "sasl.password": "admin-pw",
    }
    admin = AdminClient(admin_conf)
    for f in admin.create_topics([NewTopic("visible", 1), NewTopic("hidden", 1)]).values():
        f.result(15)
    allow = AclBinding(
        ResourceType.TOPIC,
        "visible",
        ResourcePatternType.LITERAL,
        "User:alice",
        "*",
        AclOperation.DESCRIBE,
        AclPermissionType.ALLOW,
    )
    admin.create_acls([allow])[allow].result(15)
    console = subprocess.Popen(
        [
            SEGLOG,
            "console",
            "-b",
            f"127.0.0.1:{sasl}",
            "--security-protocol",
            "SASL_PLAINTEXT",
            "--sasl-mechanism",
            "SCRAM-SHA-256",
            "--listen",
            f"127.0.0.1:{web}",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    url = f"http://127.0.0.1:{web}/api/topics"
    try:

        def answered() -> tuple[int, bytes]:
            assert console.poll() is None
            return _get(url)

        # polling for the server to come up
        status, _body = wait_until(answered, interval=0.2, ignore=(OSError,))
        assert status == 401  # no credentials
        assert _get(url, "alice", "wrong")[0] == 401
        status, body = _get(url, "alice", "alice-pw")
        assert status == 200
        assert [t["topic"] for t in json.loads(body)] == ["visible"]  # the broker's ACLs decide
        status, body = _get(url, "admin", "admin-pw")
        assert {"visible", "hidden"} <= {t["topic"] for t in json.loads(body)}
    finally:
        console.send_signal(signal.SIGINT)
        console.wait(30)
        assert broker.stop() == 0
