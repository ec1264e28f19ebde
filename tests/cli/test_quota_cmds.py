"""``seglog quota describe|alter`` against a real broker, run as a user runs them."""

from __future__ import annotations

from .conftest import Seglog


def test_alter_describe_and_delete(seglog: Seglog) -> None:
    seglog(
        "quota", "alter", "--user", "alice", "--client-id", "app",
        "--add-config", "producer_byte_rate=1048576,consumer_byte_rate=2097152",
    )  # fmt: skip
    seglog("quota", "alter", "--user-default", "--add-config", "request_percentage=25.5")
    seglog("quota", "alter", "--ip", "127.0.0.9", "--add-config", "connection_creation_rate=3")
    everything = seglog.json("quota", "describe")
    assert {
        "entity": [["client-id", "app"], ["user", "alice"]],
        "quotas": {"consumer_byte_rate": 2097152.0, "producer_byte_rate": 1048576.0},
    } in everything
    assert {"entity": [["user", None]], "quotas": {"request_percentage": 25.5}} in everything
    assert seglog.json("quota", "describe", "--ip", "127.0.0.9") == [
        {"entity": [["ip", "127.0.0.9"]], "quotas": {"connection_creation_rate": 3.0}}
    ]
    assert seglog.json("quota", "describe", "--user", "alice", "--strict") == []
    table = seglog("quota", "describe", "--user", "alice").stdout.decode()
    assert "user=alice" in table
    assert "producer_byte_rate=1048576" in table
    seglog(
        "quota", "alter", "--user", "alice", "--client-id", "app",
        "--delete-config", "producer_byte_rate", "--delete-config", "consumer_byte_rate",
    )  # fmt: skip
    assert seglog.json("quota", "describe", "--user", "alice") == []
    seglog("quota", "alter", "--user-default", "--delete-config", "request_percentage")
    seglog("quota", "alter", "--ip", "127.0.0.9", "--delete-config", "connection_creation_rate")
    assert seglog.json("quota", "describe") == []


def test_validate_only_and_errors(seglog: Seglog) -> None:
    done = seglog(
        "quota", "alter", "--client-id", "x", "--add-config", "producer_byte_rate=10",
        "--validate-only",
    )  # fmt: skip
    assert b"valid" in done.stdout
    assert seglog.json("quota", "describe", "--client-id", "x") == []
    bad = seglog("quota", "alter", "--client-id", "x", "--add-config", "nope=1", check=False)
    assert bad.returncode == 1
    assert b"error 42" in bad.stderr
    assert b"nope" in bad.stderr
    fraction = seglog(
        "quota", "alter", "--user", "u", "--add-config", "consumer_byte_rate=1.5", check=False
    )
    assert fraction.returncode == 1
    nothing = seglog("quota", "alter", "--add-config", "producer_byte_rate=1", check=False)
    assert nothing.returncode == 2
    malformed = seglog("quota", "alter", "--user", "u", "--add-config", "rate", check=False)
    assert malformed.returncode == 2
