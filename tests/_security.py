"""What the secured-broker fixtures share: a test CA with the broker's certificate, SCRAM
users stored with ``seglog user add`` before the broker starts, and a client's SASL
settings."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import trustme

SEGLOG = str(Path(sys.executable).with_name("seglog"))


def server_cert(work: Path, *hosts: str) -> trustme.CA:
    """A new CA; the broker's key and certificate chain for ``hosts`` (default 127.0.0.1
    and localhost) in ``work/server.pem``, the CA certificate in ``work/ca.pem``."""
    ca = trustme.CA()
    cert = ca.issue_cert(*(hosts or ("127.0.0.1", "localhost")))
    cert.private_key_and_cert_chain_pem.write_to_path(str(work / "server.pem"))
    ca.cert_pem.write_to_path(str(work / "ca.pem"))
    return ca


def sasl_conf(
    user: str,
    password: str,
    mechanism: str = "SCRAM-SHA-256",
    protocol: str = "SASL_PLAINTEXT",
    **extra: Any,
) -> dict[str, Any]:
    """A client's SASL settings by librdkafka's names (``security.protocol``,
    ``sasl.mechanism``, ``sasl.username``, ``sasl.password``), ``extra`` added; also what
    ``seglog.broker.ClientSecurity`` takes."""
    return {
        "security.protocol": protocol,
        "sasl.mechanism": mechanism,
        "sasl.username": user,
        "sasl.password": password,
        **extra,
    }


def add_users(data: Path, users: Mapping[str, str]) -> None:
    """``seglog user add NAME --password PASSWORD`` for each user, into data directory
    ``data`` (SCRAM credentials, read by the broker when it starts)."""
    for user, password in users.items():
        subprocess.run(
            [SEGLOG, "user", "add", user, "--data-dir", str(data), "--password", password],
            check=True,
            capture_output=True,
        )
