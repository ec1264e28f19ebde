"""The schema registry behind the broker's security: HTTPS with the broker's certificate
when a listener uses TLS, HTTP Basic authentication against the SCRAM users when one
uses SASL, and the broker's ACLs (a subject is its topic's TOPIC resource, the global
settings the CLUSTER resource)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka.admin import (
    AclBinding,
    AclOperation,
    AclPermissionType,
    AdminClient,
    ResourcePatternType,
    ResourceType,
)
from confluent_kafka.schema_registry import Schema, SchemaRegistryClient
from confluent_kafka.schema_registry.error import SchemaRegistryError
from tests._security import add_users, server_cert
from tests._wait import wait_until

from seglog.broker import BrokerProcess, free_port, start_broker

USERS = {"admin": "admin-secret", "alice": "alice-secret", "bob": "bob-secret"}
SCHEMA = json.dumps({"type": "record", "name": "Order", "fields": [{"name": "id", "type": "long"}]})


class Secured:
    def __init__(self, proc: BrokerProcess, url: str, ca: Path, sasl_port: int) -> None:
        self.proc, self.url, self.ca, self.sasl_port = proc, url, ca, sasl_port

    def client(self, user: str | None, password: str | None = None) -> SchemaRegistryClient:
        conf: dict[str, Any] = {"url": self.url, "ssl.ca.location": str(self.ca)}
        if user is not None:
            conf["basic.auth.user.info"] = f"{user}:{password or USERS[user]}"
        return SchemaRegistryClient(conf)

    def admin(self) -> AdminClient:
        return AdminClient({
            "bootstrap.servers": f"127.0.0.1:{self.sasl_port}",
            "security.protocol": "SASL_SSL",
            "ssl.ca.location": str(self.ca),
            "sasl.mechanism": "SCRAM-SHA-256",
            "sasl.username": "admin",
            "sasl.password": USERS["admin"],
        })  # fmt: skip


@pytest.fixture(scope="module")
def secured(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Secured]:
    work = tmp_path_factory.mktemp("secured-registry")
    server_cert(work)
    data = work / "data"
    data.mkdir()
    add_users(data, USERS)
    plain, sasl, registry_port = free_port(), free_port(), free_port()
    proc = start_broker(
        data,
        port=plain,
        extra_args=[
            "--listeners", f"PLAINTEXT://127.0.0.1:{plain},SASL_SSL://127.0.0.1:{sasl}",
            "--ssl-certfile", str(work / "server.pem"),
            "--authorizer-class-name", "StandardAuthorizer",
            "--super-users", "User:admin",
            "--schema-registry-listen", f"127.0.0.1:{registry_port}",
        ],
    )  # fmt: skip
    secured = Secured(proc, f"https://127.0.0.1:{registry_port}", work / "ca.pem", sasl)
    try:
        wait_until(lambda: _types(secured), 30, 0.05, proc.log_text)
        yield secured
    finally:
        assert proc.stop() == 0, proc.log_text()
        assert "Traceback" not in proc.log_text(), proc.log_text()


def _types(secured: Secured) -> bool:
    try:
        return bool(secured.client("admin").get_subjects() == [])
    except Exception:
        return False


def _refused(call: Any) -> tuple[int, int]:
    with pytest.raises(SchemaRegistryError) as info:
        call()
    return info.value.http_status_code, info.value.error_code


def _grant(secured: Secured, topic: str, user: str, op: AclOperation) -> None:
    binding = AclBinding(
        ResourceType.TOPIC, topic, ResourcePatternType.LITERAL, f"User:{user}", "*", op,
        AclPermissionType.ALLOW,
    )  # fmt: skip
    admin = secured.admin()
    for future in admin.create_acls([binding]).values():
        future.result(15)


def test_basic_auth_against_scram_users(secured: Secured) -> None:
    schema = Schema(SCHEMA, "AVRO")
    assert _refused(lambda: secured.client(None).get_subjects()) == (401, 40101)
    assert _refused(lambda: secured.client("alice", "wrong").get_subjects()) == (401, 40101)
    assert _refused(lambda: secured.client("nobody", "x").register_schema("a-value", schema)) == (
        401, 40101)  # fmt: skip
    assert secured.client("admin").register_schema("admin-only-value", schema) > 0


def test_acls_on_subjects_and_global_settings(secured: Secured) -> None:
    schema = Schema(SCHEMA, "AVRO")
    alice, bob = secured.client("alice"), secured.client("bob")
    assert _refused(lambda: alice.register_schema("orders-value", schema)) == (403, 40301)
    _grant(secured, "orders", "alice", AclOperation.WRITE)
    schema_id = wait_until(lambda: _registered(alice, schema))
    # bob sees neither the subject nor the schema until he may read the topic
    assert "orders-value" not in bob.get_subjects()
    assert _refused(lambda: bob.get_latest_version("orders-value")) == (403, 40301)
    assert _refused(lambda: bob.get_schema(schema_id)) == (403, 40301)
    _grant(secured, "orders", "bob", AclOperation.READ)
    wait_until(lambda: "orders-value" in bob.get_subjects())
    assert json.loads(bob.get_schema(schema_id).schema_str) == json.loads(SCHEMA)
    assert _refused(lambda: bob.register_schema("orders-value", schema)) == (403, 40301)
    assert _refused(lambda: bob.delete_subject("orders-value")) == (403, 40301)
    # the global config is the CLUSTER resource: the super user only here
    assert _refused(lambda: alice.set_compatibility(level="FULL")) == (403, 40301)
    assert secured.client("admin").set_compatibility(level="FULL") == {"compatibility": "FULL"}


def _registered(client: SchemaRegistryClient, schema: Schema) -> int | None:
    try:
        return int(client.register_schema("orders-value", schema))
    except SchemaRegistryError:
        return None  # the ACL has not reached the authorizer yet
