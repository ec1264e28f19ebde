"""The principal of a TLS client certificate is its subject DN as Kafka prints it
(RFC 2253, special characters in a value escaped): a certificate cannot pose as another
DN by putting ``,OU=...`` inside its common name."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import trustme
from confluent_kafka import KafkaException
from confluent_kafka.admin import (
    AclBinding,
    AclOperation,
    AclPermissionType,
    AdminClient,
    ResourcePatternType,
    ResourceType,
)
from tests._security import server_cert

from seglog.broker import BrokerProcess, free_port, start_broker

ADMIN_DN = "CN=admin,OU=ops,OU=dev,O=Acme"  # a real admin's subject (two OUs)


@pytest.fixture
def tls_broker(tmp_path: Path) -> Iterator[tuple[BrokerProcess, int, Path, trustme.CA]]:
    ca = server_cert(tmp_path, "127.0.0.1")
    data = tmp_path / "data"
    data.mkdir()
    plain, tls = free_port(), free_port()
    proc = start_broker(
        data,
        port=plain,
        extra_args=[
            "--listeners", f"PLAINTEXT://127.0.0.1:{plain},SSL://127.0.0.1:{tls}",
            "--ssl-certfile", str(tmp_path / "server.pem"),
            "--ssl-cafile", str(tmp_path / "ca.pem"),
            "--ssl-client-auth", "required",
            "--authorizer-class-name", "StandardAuthorizer",
            "--super-users", f"User:{ADMIN_DN};User:CN=root,OU=dev,O=Acme",
        ],
    )  # fmt: skip
    try:
        yield proc, tls, tmp_path, ca
    finally:
        assert proc.stop() == 0, proc.log_text()


def _create_acl(port: int, ca_pem: Path, client_pem: Path) -> Any:
    admin = AdminClient(
        {
            "bootstrap.servers": f"127.0.0.1:{port}",
            "security.protocol": "SSL",
            "ssl.ca.location": str(ca_pem),
            "ssl.certificate.location": str(client_pem),
            "ssl.key.location": str(client_pem),
        }
    )
    binding = AclBinding(
        ResourceType.TOPIC, "t", ResourcePatternType.LITERAL, "User:x", "*",
        AclOperation.READ, AclPermissionType.ALLOW,
    )  # fmt: skip
    return admin.create_acls([binding], request_timeout=15)[binding].result(20)


def test_common_name_with_a_comma_cannot_pose_as_another_dn(
    tls_broker: tuple[BrokerProcess, int, Path, trustme.CA],
) -> None:
    proc, port, work, ca = tls_broker
    root = ca.issue_cert("root@acme", common_name="root", organization_name="Acme",
                         organization_unit_name="dev")  # fmt: skip
    root.private_key_and_cert_chain_pem.write_to_path(str(work / "root.pem"))
    assert _create_acl(port, work / "ca.pem", work / "root.pem") is None  # a super user
    # subject O=Acme, OU=dev, CN="admin,OU=ops": Kafka's principal is
    # CN=admin\,OU=ops,OU=dev,O=Acme, not the admin's DN
    forged = ca.issue_cert("mallory@acme", common_name="admin,OU=ops", organization_name="Acme",
                           organization_unit_name="dev")  # fmt: skip
    forged.private_key_and_cert_chain_pem.write_to_path(str(work / "forged.pem"))
    with pytest.raises(KafkaException) as failed:
        _create_acl(port, work / "ca.pem", work / "forged.pem")
    assert failed.value.args[0].code() == 31  # CLUSTER_AUTHORIZATION_FAILED
    assert "TLS client User:CN=admin\\,OU=ops,OU=dev,O=Acme from" in proc.log_text()
