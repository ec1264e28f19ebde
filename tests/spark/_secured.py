"""A ``seglog serve`` with PLAINTEXT, SSL and SASL_SSL listeners for the wire-mode tests:
certificates made by ``trustme``, SCRAM users added with ``seglog user add``."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from tests._security import add_users, server_cert

from seglog.broker import BrokerProcess, free_port, start_broker

USERS = {"alice": "alice-secret", "bob": "bob-secret"}


@dataclass
class SecuredBroker:
    """The broker process, its listeners' ports, the CA and a client certificate (PEM)."""

    proc: BrokerProcess
    ports: dict[str, int]
    ca: Path
    client_pem: Path

    def bootstrap(self, protocol: str) -> str:
        """``127.0.0.1:port`` of the listener speaking ``protocol``."""
        return f"127.0.0.1:{self.ports[protocol]}"

    def librdkafka(self, user: str = "alice", password: str | None = None) -> dict[str, str]:
        """confluent-kafka settings for SASL_SSL SCRAM-SHA-512 as ``user``."""
        return {
            "bootstrap.servers": self.bootstrap("SASL_SSL"),
            "security.protocol": "SASL_SSL",
            "sasl.mechanism": "SCRAM-SHA-512",
            "sasl.username": user,
            "sasl.password": USERS[user] if password is None else password,
            "ssl.ca.location": str(self.ca),
        }


def start_secured(work: Path) -> SecuredBroker:
    """Start the broker under ``work`` (certificates, data directory)."""
    ca = server_cert(work)
    client = ca.issue_cert("alice@example.com", common_name="alice")
    client.private_key_and_cert_chain_pem.write_to_path(str(work / "client.pem"))
    data = work / "data"
    data.mkdir()
    add_users(data, USERS)
    ports = {p: free_port() for p in ("PLAINTEXT", "SSL", "SASL_SSL")}
    listeners = ",".join(f"{p}://127.0.0.1:{port}" for p, port in ports.items())
    proc = start_broker(
        data,
        port=ports["PLAINTEXT"],
        extra_args=[
            "--listeners", listeners,
            "--ssl-certfile", str(work / "server.pem"),
            "--ssl-cafile", str(work / "ca.pem"),
            "--ssl-client-auth", "requested",
        ],
    )  # fmt: skip
    return SecuredBroker(proc, ports, work / "ca.pem", work / "client.pem")
