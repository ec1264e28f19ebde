"""ACLs with Kafka's model through confluent-kafka's admin client: a super user manages
them, other principals get 29/30/31 until allowed; prefixed patterns, deny over allow,
Metadata hiding what may not be described, persistence across a restart."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import (
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    AdminClient,
    NewTopic,
    ResourcePatternType,
    ResourceType,
)
from kafka.protocol.admin import DescribeTransactionsRequest, ListTransactionsRequest
from kafka.protocol.metadata import FindCoordinatorRequest
from kafka.protocol.producer import InitProducerIdRequest, WriteTxnMarkersRequest
from tests._security import SEGLOG, add_users, sasl_conf

from seglog.broker import BrokerProcess, ClientSecurity, KafkaConnection, free_port, start_broker
from seglog.broker.protocol.messages.consumer_group import (
    ConsumerGroupDescribeRequest,
    ConsumerGroupHeartbeatRequest,
)

from ._wire import make_batch, produce_request

USERS = {"admin": "admin-pw", "alice": "alice-pw", "bob": "bob-pw"}


class Acled:
    def __init__(self, proc: BrokerProcess, sasl_port: int) -> None:
        self.proc = proc
        self.sasl_port = sasl_port

    def conf(self, user: str, **extra: Any) -> dict[str, Any]:
        return sasl_conf(
            user, USERS[user], **{"bootstrap.servers": f"127.0.0.1:{self.sasl_port}", **extra}
        )


def _start(data: Path) -> tuple[BrokerProcess, int]:
    plain, sasl = free_port(), free_port()
    proc = start_broker(
        data,
        port=plain,
        extra_args=[
            "--listeners", f"PLAINTEXT://127.0.0.1:{plain},SASL_PLAINTEXT://127.0.0.1:{sasl}",
            "--authorizer-class-name", "StandardAuthorizer",
            "--super-users", "User:admin",
        ],
    )  # fmt: skip
    return proc, sasl


@pytest.fixture
def acled(tmp_path: Path) -> Iterator[Acled]:
    data = tmp_path / "data"
    data.mkdir()
    add_users(data, USERS)
    proc, sasl = _start(data)
    acled = Acled(proc, sasl)
    try:
        yield acled
    finally:  # the broker in use at the end (a test may have restarted it)
        for started in {id(p): p for p in (proc, acled.proc)}.values():
            assert started.stop() == 0, started.log_text()


def _allow(topic: str, user: str, op: AclOperation, pattern: Any = None, kind: Any = None) -> Any:
    return AclBinding(
        kind or ResourceType.TOPIC,
        topic,
        pattern or ResourcePatternType.LITERAL,
        f"User:{user}",
        "*",
        op,
        AclPermissionType.ALLOW,
    )


def _produce_error(conf: dict[str, Any], topic: str) -> int | None:
    errors: list[Any] = []
    producer = Producer({**conf, "message.send.max.retries": 0, "enable.idempotence": False})
    producer.produce(topic, value=b"v", on_delivery=lambda e, _m: errors.append(e))
    producer.flush(15)
    assert errors, "no delivery report"
    return None if errors[0] is None else int(errors[0].code())


def test_acls_gate_topics_and_groups(acled: Acled) -> None:
    admin = AdminClient(acled.conf("admin"))  # super user
    admin.create_topics([NewTopic("orders", 1), NewTopic("secret", 1)])["orders"].result(15)
    alice = acled.conf("alice")

    # deny by default once the authorizer is on
    assert _produce_error(alice, "orders") == KafkaError.TOPIC_AUTHORIZATION_FAILED
    visible = AdminClient(alice).list_topics(timeout=15).topics
    assert "orders" not in visible
    assert "secret" not in visible

    bindings = [
        _allow("orders", "alice", AclOperation.WRITE),
        _allow("ord", "alice", AclOperation.READ, ResourcePatternType.PREFIXED),
        _allow("billing", "alice", AclOperation.READ, kind=ResourceType.GROUP),
    ]
    for future in admin.create_acls(bindings).values():
        future.result(15)
    assert _produce_error(alice, "orders") is None  # WRITE allowed now
    visible = AdminClient(alice).list_topics(timeout=15).topics
    assert "orders" in visible  # READ/WRITE imply DESCRIBE
    assert "secret" not in visible  # still hidden

    consumer = Consumer({**alice, "group.id": "billing", "auto.offset.reset": "earliest"})
    consumer.assign([TopicPartition("orders", 0, 0)])
    try:
        msg = consumer.poll(15)
        assert msg is not None
        assert msg.error() is None
        consumer.commit(message=msg, asynchronous=False)  # READ on group billing
    finally:
        consumer.close()
    other = Consumer({**alice, "group.id": "not-billing"})
    other.assign([TopicPartition("orders", 0, 0)])
    try:
        with pytest.raises(KafkaException) as info:
            other.commit(offsets=[TopicPartition("orders", 0, 1)], asynchronous=False)
        assert info.value.args[0].code() == KafkaError.GROUP_AUTHORIZATION_FAILED
    finally:
        other.close()

    # DENY wins over ALLOW
    deny = AclBinding(
        ResourceType.TOPIC, "orders", ResourcePatternType.LITERAL, "User:alice", "*",
        AclOperation.WRITE, AclPermissionType.DENY,
    )  # fmt: skip
    admin.create_acls([deny])[deny].result(15)
    assert _produce_error(alice, "orders") == KafkaError.TOPIC_AUTHORIZATION_FAILED

    # alice may not manage ACLs (CLUSTER ALTER)
    alice_admin = AdminClient(alice)
    mine = _allow("x", "alice", AclOperation.ALL)
    with pytest.raises(KafkaException) as info:
        alice_admin.create_acls([mine])[mine].result(15)
    assert info.value.args[0].code() == KafkaError.CLUSTER_AUTHORIZATION_FAILED

    described = admin.describe_acls(
        AclBindingFilter(
            ResourceType.ANY,
            None,
            ResourcePatternType.ANY,
            "User:alice",
            None,
            AclOperation.ANY,
            AclPermissionType.ANY,
        )
    ).result(15)
    assert len(described) == 4


def test_acls_persist_and_delete(acled: Acled, tmp_path: Path) -> None:
    admin = AdminClient(acled.conf("admin"))
    admin.create_topics([NewTopic("kept", 1)])["kept"].result(15)
    binding = _allow("kept", "bob", AclOperation.WRITE)
    admin.create_acls([binding])[binding].result(15)
    assert acled.proc.stop() == 0
    proc, sasl = _start(acled.proc.data_dir)
    again = Acled(proc, sasl)
    acled.proc = proc
    assert _produce_error(again.conf("bob"), "kept") is None  # survived the restart
    admin = AdminClient(again.conf("admin"))
    flt = AclBindingFilter(
        ResourceType.TOPIC, "kept", ResourcePatternType.LITERAL, None, None,
        AclOperation.ANY, AclPermissionType.ANY,
    )  # fmt: skip
    deleted = admin.delete_acls([flt])[flt].result(15)
    assert [d.principal for d in deleted] == ["User:bob"]
    assert _produce_error(again.conf("bob"), "kept") == KafkaError.TOPIC_AUTHORIZATION_FAILED


def test_create_acls_refuses_an_empty_resource_name(acled: Acled) -> None:
    """CreateAcls with an empty resource name is 42 INVALID_REQUEST with Kafka's message
    (AclControlManager.validateNewAcl); the other bindings of the request are created."""
    admin = AdminClient(acled.conf("admin"))
    empty = _allow("", "bob", AclOperation.READ)
    named = _allow("named", "bob", AclOperation.READ)
    futures = admin.create_acls([empty, named])
    with pytest.raises(KafkaException) as info:
        futures[empty].result(15)
    assert info.value.args[0].code() == KafkaError.INVALID_REQUEST
    assert "Resource name should not be empty" in info.value.args[0].str()
    futures[named].result(15)
    everything = AclBindingFilter(
        ResourceType.ANY, None, ResourcePatternType.ANY, "User:bob", None,
        AclOperation.ANY, AclPermissionType.ANY,
    )  # fmt: skip
    described = admin.describe_acls(everything).result(15)
    assert [b.name for b in described] == ["named"]


def test_acl_apis_without_an_authorizer(broker_factory: Callable[..., BrokerProcess]) -> None:
    proc = broker_factory()
    admin = AdminClient({"bootstrap.servers": proc.bootstrap})
    binding = _allow("t", "alice", AclOperation.READ)
    with pytest.raises(KafkaException) as info:
        admin.create_acls([binding])[binding].result(15)
    assert info.value.args[0].code() == KafkaError.SECURITY_DISABLED


def test_acl_cli(acled: Acled) -> None:
    admin_opts = [
        "-b", f"127.0.0.1:{acled.sasl_port}", "--security-protocol", "SASL_PLAINTEXT",
        "--sasl-mechanism", "SCRAM-SHA-256", "--sasl-username", "admin",
        "--sasl-password", USERS["admin"],
    ]  # fmt: skip

    def seglog(*args: str) -> subprocess.CompletedProcess[bytes]:
        return subprocess.run(
            [SEGLOG, "acl", *args, *admin_opts], capture_output=True, timeout=60, check=False
        )

    creator = AdminClient(acled.conf("admin"))
    creator.create_topics([NewTopic("logs-app", 1)])["logs-app"].result(15)
    added = seglog(
        "add", "--allow-principal", "User:bob", "--operation", "write", "--operation", "read",
        "--topic", "logs-", "--resource-pattern-type", "prefixed",
    )  # fmt: skip
    assert added.returncode == 0, added.stderr
    listed = json.loads(seglog("list", "--principal", "User:bob", "--json").stdout)
    assert sorted(r["operation"] for r in listed) == ["read", "write"]
    assert {r["pattern_type"] for r in listed} == {"prefixed"}
    assert _produce_error(acled.conf("bob"), "logs-app") is None  # the prefix allows it
    assert seglog("add", "--operation", "read", "--topic", "x").returncode == 2  # no principal
    deleted = seglog("delete", "--topic", "logs-", "--resource-pattern-type", "prefixed")
    assert deleted.returncode == 0, deleted.stderr
    assert json.loads(seglog("list", "--json").stdout) == []


def test_describe_quorum_needs_cluster_describe(acled: Acled) -> None:
    from kafka.admin import KafkaAdminClient  # noqa: PLC0415
    from kafka.errors import ClusterAuthorizationFailedError  # noqa: PLC0415

    def quorum(user: str) -> Any:
        client = KafkaAdminClient(
            bootstrap_servers=f"127.0.0.1:{acled.sasl_port}",
            security_protocol="SASL_PLAINTEXT",
            sasl_mechanism="SCRAM-SHA-256",
            sasl_plain_username=user,
            sasl_plain_password=USERS[user],
        )
        try:
            return client.describe_metadata_quorum()
        finally:
            client.close()

    with pytest.raises(ClusterAuthorizationFailedError):
        quorum("alice")
    assert quorum("admin")["topics"][0]["partitions"][0]["leader_id"] == 0  # super user
    admin = AdminClient(acled.conf("admin"))
    grant = _allow("kafka-cluster", "alice", AclOperation.DESCRIBE, kind=ResourceType.BROKER)
    admin.create_acls([grant])[grant].result(15)
    assert quorum("alice")["topics"][0]["partitions"][0]["leader_id"] == 0


def test_log_dirs_and_config_resources_need_cluster_rights(acled: Acled) -> None:
    """AlterReplicaLogDirs needs ALTER on the cluster (31 per partition), ListConfigResources
    DESCRIBE_CONFIGS on it (31 for the request); a super user is served."""
    import kafka.errors as ke  # noqa: PLC0415
    from kafka import TopicPartitionReplica  # noqa: PLC0415
    from kafka.admin import KafkaAdminClient  # noqa: PLC0415

    creator = AdminClient(acled.conf("admin"))
    creator.create_topics([NewTopic("dirs", 1)])["dirs"].result(15)
    current = str(acled.proc.data_dir.resolve())
    replica = TopicPartitionReplica("dirs", 0, 0)

    def as_user(user: str) -> tuple[Any, Any]:
        client = KafkaAdminClient(
            bootstrap_servers=f"127.0.0.1:{acled.sasl_port}",
            security_protocol="SASL_PLAINTEXT",
            sasl_mechanism="SCRAM-SHA-256",
            sasl_plain_username=user,
            sasl_plain_password=USERS[user],
        )
        try:
            moved = client.alter_replica_log_dirs({replica: current})
            try:
                listed: Any = client.list_config_resources(["BROKER"])
            except ke.ClusterAuthorizationFailedError as exc:
                listed = exc
            return moved, listed
        finally:
            client.close()

    moved, listed = as_user("alice")
    assert moved == {replica: ke.ClusterAuthorizationFailedError}
    assert isinstance(listed, ke.ClusterAuthorizationFailedError)
    assert as_user("admin") == ({replica: ke.NoError}, {"broker": ["0"]})


def test_metadata_by_topic_id_needs_describe(acled: Acled) -> None:
    """A topic asked for by id is described only to a principal that may DESCRIBE it;
    else 29 with no name and no partitions (Kafka: topic ids are not secret, names are)."""
    from kafka.protocol.metadata import MetadataRequest  # noqa: PLC0415

    from ._wire import Wire  # noqa: PLC0415

    admin = AdminClient(acled.conf("admin"))
    admin.create_topics([NewTopic("payroll", 3, 1)])["payroll"].result(15)
    grant = _allow("payroll", "ANONYMOUS", AclOperation.DESCRIBE)
    admin.create_acls([grant])[grant].result(15)
    with Wire(acled.proc.bootstrap) as w:  # PLAINTEXT: User:ANONYMOUS
        by_name = MetadataRequest[12](topics=[MetadataRequest.MetadataRequestTopic(name="payroll")])
        topic_id = w.call(by_name).topics[0].topic_id
        flt = AclBindingFilter(
            ResourceType.TOPIC, "payroll", ResourcePatternType.LITERAL, "User:ANONYMOUS", "*",
            AclOperation.DESCRIBE, AclPermissionType.ALLOW,
        )  # fmt: skip
        assert len(admin.delete_acls([flt])[flt].result(15)) == 1  # access revoked
        assert w.call(by_name).topics[0].error_code == 29
        by_id = MetadataRequest[12](
            topics=[MetadataRequest.MetadataRequestTopic(topic_id=topic_id, name=None)]
        )
        (topic,) = w.call(by_id).topics
        assert (topic.error_code, topic.name, topic.partitions) == (29, None, [])
        assert topic.topic_id == topic_id


def test_delete_topics_by_id_hides_the_name_without_describe(acled: Acled) -> None:
    """DeleteTopics by id (v6) refused for lack of DELETE names the topic only to a
    principal that may DESCRIBE it (Kafka: 29 and a null name; the id is not secret)."""
    from kafka.protocol.admin import DeleteTopicsRequest  # noqa: PLC0415
    from kafka.protocol.metadata import MetadataRequest  # noqa: PLC0415

    from ._wire import Wire  # noqa: PLC0415

    admin = AdminClient(acled.conf("admin"))
    for name in ("salaries", "visible"):
        admin.create_topics([NewTopic(name, 1, 1)])[name].result(15)
    req = DeleteTopicsRequest[6]
    with Wire(acled.proc.bootstrap) as w:  # PLAINTEXT: User:ANONYMOUS
        ids = {}
        for name in ("salaries", "visible"):
            grant = _allow(name, "ANONYMOUS", AclOperation.DESCRIBE)
            admin.create_acls([grant])[grant].result(15)
            meta = MetadataRequest[12](topics=[MetadataRequest.MetadataRequestTopic(name=name)])
            ids[name] = w.call(meta).topics[0].topic_id
        flt = AclBindingFilter(
            ResourceType.TOPIC, "salaries", ResourcePatternType.LITERAL, "User:ANONYMOUS", "*",
            AclOperation.DESCRIBE, AclPermissionType.ALLOW,
        )  # fmt: skip
        assert len(admin.delete_acls([flt])[flt].result(15)) == 1  # may no longer describe it
        topics = [req.DeleteTopicState(name=None, topic_id=ids[n]) for n in ("salaries", "visible")]
        resp = w.call(req(topics=topics, timeout_ms=5000))
    assert [(r.name, r.topic_id, r.error_code) for r in resp.responses] == [
        (None, ids["salaries"], 29),
        ("visible", ids["visible"], 29),  # may describe it: named
    ]
    assert {"salaries", "visible"} <= set(admin.list_topics(timeout=15).topics)  # kept


def test_consumer_group_heartbeat_acls(acled: Acled) -> None:
    """KIP-848 as Kafka's KafkaApis: the heartbeat needs READ on the group (30), a regex
    subscription matches only topics the principal may DESCRIBE, ConsumerGroupDescribe
    needs DESCRIBE on the group."""
    admin = AdminClient(acled.conf("admin"))
    futures = admin.create_topics([NewTopic("rx-open", 1), NewTopic("rx-closed", 1)])
    for future in futures.values():
        future.result(15)
    bindings = [
        _allow("kip848", "alice", AclOperation.READ, kind=ResourceType.GROUP),
        _allow("rx-open", "alice", AclOperation.DESCRIBE),
    ]
    for future in admin.create_acls(bindings).values():
        future.result(15)
    heartbeat: Any = ConsumerGroupHeartbeatRequest[1]
    describe: Any = ConsumerGroupDescribeRequest[0]
    security = ClientSecurity(acled.conf("alice"))
    with KafkaConnection("127.0.0.1", acled.sasl_port, security=security) as conn:

        def join(group: str) -> Any:
            return conn.call(
                heartbeat(
                    group_id=group, member_id="m1", member_epoch=0, rebalance_timeout_ms=5000,
                    subscribed_topic_regex="rx-.*", topic_partitions=[],
                )
            )  # fmt: skip

        assert join("other").error_code == KafkaError.GROUP_AUTHORIZATION_FAILED
        joined = join("kip848")
        assert joined.error_code == 0
        assert len(joined.assignment.topic_partitions) == 1  # rx-open only
        both = conn.call(
            describe(group_ids=["kip848", "other"], include_authorized_operations=False)
        )
        # READ on the group implies DESCRIBE; nothing on "other"
        assert [g.error_code for g in both.groups] == [0, KafkaError.GROUP_AUTHORIZATION_FAILED]
    with KafkaConnection(
        "127.0.0.1", acled.sasl_port, security=ClientSecurity(acled.conf("admin"))
    ) as conn:
        desc = conn.call(describe(group_ids=["kip848"], include_authorized_operations=False))
        member = desc.groups[0].members[0]
        assert member.subscribed_topic_regex == "rx-.*"
        assert [tp.topic_name for tp in member.assignment.topic_partitions] == ["rx-open"]


def test_transactional_id_acls(acled: Acled) -> None:
    """Kafka's checks: InitProducerId/AddPartitionsToTxn/EndTxn need WRITE on the
    TRANSACTIONAL_ID (53), FindCoordinator and DescribeTransactions DESCRIBE on it (WRITE
    implies it), an idempotent producer IDEMPOTENT_WRITE on the cluster (31),
    WriteTxnMarkers CLUSTER_ACTION (31); ListTransactions lists only described ids."""
    admin = AdminClient(acled.conf("admin"))
    admin.create_topics([NewTopic("txn-acl", 1)])["txn-acl"].result(15)
    bindings = [
        _allow("tx-alice", "alice", AclOperation.WRITE, kind=ResourceType.TRANSACTIONAL_ID),
        _allow("txn-acl", "alice", AclOperation.WRITE),
    ]
    for future in admin.create_acls(bindings).values():
        future.result(15)
    with KafkaConnection(
        "127.0.0.1", acled.sasl_port, security=ClientSecurity(acled.conf("alice"))
    ) as conn:

        def init(txn_id: str | None) -> int:
            req = InitProducerIdRequest[4](transactional_id=txn_id, transaction_timeout_ms=9000)
            return int(conn.call(req).error_code)

        assert init("tx-other") == KafkaError.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
        assert init(None) == KafkaError.CLUSTER_AUTHORIZATION_FAILED
        assert init("tx-alice") == 0
        found = conn.call(FindCoordinatorRequest[3](key="tx-other", key_type=1))
        assert found.error_code == KafkaError.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
        assert conn.call(FindCoordinatorRequest[3](key="tx-alice", key_type=1)).error_code == 0
        described = conn.call(
            DescribeTransactionsRequest[0](transactional_ids=["tx-alice", "tx-other"])
        )
        assert [t.error_code for t in described.transaction_states] == [
            0, KafkaError.TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
        ]  # fmt: skip
        listed = conn.call(ListTransactionsRequest[0](state_filters=[], producer_id_filters=[]))
        assert [t.transactional_id for t in listed.transaction_states] == ["tx-alice"]
        mreq = WriteTxnMarkersRequest[1]
        marker = mreq.WritableTxnMarker(
            producer_id=0, producer_epoch=0, transaction_result=False,
            topics=[mreq.WritableTxnMarker.WritableTxnMarkerTopic(
                name="txn-acl", partition_indexes=[0])],
            coordinator_epoch=0,
        )  # fmt: skip
        code = conn.call(mreq(markers=[marker])).markers[0].topics[0].partitions[0].error_code
        assert code == KafkaError.CLUSTER_AUTHORIZATION_FAILED
        produce = produce_request("txn-acl", make_batch([b"v"]))
        produce.transactional_id = "tx-other"
        part = conn.call(produce).responses[0].partition_responses[0]
        assert part.error_code == KafkaError.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
    with KafkaConnection(
        "127.0.0.1", acled.sasl_port, security=ClientSecurity(acled.conf("admin"))
    ) as conn:
        req = InitProducerIdRequest[4](transactional_id="tx-other", transaction_timeout_ms=9000)
        assert conn.call(req).error_code == 0  # super user
