"""The broker's blocking wire client (``seglog.broker.KafkaConnection``, the one Spark's raw
reader and sink use) against a real ``seglog serve``: PLAINTEXT requests, pipelined answers
(ApiVersions' v0 response header among flexible ones), SASL logins right and wrong."""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest
from kafka.errors import SaslAuthenticationFailedError, UnsupportedSaslMechanismError
from kafka.protocol.metadata import (
    ApiVersionsRequest,
    ApiVersionsResponse,
    MetadataRequest,
    MetadataResponse,
)
from tests._security import add_users, sasl_conf

from seglog.broker import (
    BrokerProcess,
    ClientSecurity,
    KafkaConnection,
    client_supports,
    free_port,
    split_host_port,
    start_broker,
)
from seglog.broker.protocol.api_keys import ApiKey


class _Broker:
    """A broker with a PLAINTEXT and a SASL_PLAINTEXT listener; user alice (SCRAM)."""

    def __init__(self, proc: BrokerProcess, sasl_port: int) -> None:
        self.proc = proc
        self.sasl_port = sasl_port


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[_Broker]:
    data = tmp_path_factory.mktemp("client") / "data"
    data.mkdir()
    add_users(data, {"alice": "alice-secret"})
    plain, sasl = free_port(), free_port()
    proc = start_broker(
        data,
        port=plain,
        extra_args=[
            "--listeners", f"PLAINTEXT://127.0.0.1:{plain},SASL_PLAINTEXT://127.0.0.1:{sasl}",
        ],
    )  # fmt: skip
    try:
        yield _Broker(proc, sasl)
    finally:
        assert proc.stop() == 0, proc.log_text()
        assert "Traceback" not in proc.log_text()


def _sasl(mechanism: str, password: str) -> ClientSecurity:
    return ClientSecurity(sasl_conf("alice", password, mechanism))


def test_plaintext_metadata_call(served: _Broker) -> None:
    with KafkaConnection("127.0.0.1", served.proc.port, "client-test", 10) as conn:
        meta = conn.call(
            MetadataRequest[12](
                topics=[MetadataRequest.MetadataRequestTopic(name="client-topic")],
                allow_auto_topic_creation=True,
                include_topic_authorized_operations=False,
            )
        )
        assert isinstance(meta, MetadataResponse)
        assert [(b.host, b.port) for b in meta.brokers] == [("127.0.0.1", served.proc.port)]
        assert [(t.name, t.error_code) for t in meta.topics] == [("client-topic", 0)]
        assert conn.correlation_id == 1
        again = conn.topic_metadata("client-topic", auto_create=False)
        assert [len(t.partitions) for t in again.topics] == [1]


def test_pipelined_answers_come_back_in_order(served: _Broker) -> None:
    """Two requests sent before either answer is read: ApiVersions v3 (flexible body, v0
    response header) then Metadata v12 (v1 header), each decoded with its own class."""
    with KafkaConnection("127.0.0.1", served.proc.port) as conn:
        first = conn.send(
            ApiVersionsRequest[3](client_software_name="t", client_software_version="1")
        )
        second = conn.send(MetadataRequest[12](topics=None, allow_auto_topic_creation=False))
        assert (first, second) == (1, 2)
        versions = conn.receive()
        assert isinstance(versions, ApiVersionsResponse)
        assert versions.error_code == 0
        assert ApiKey.METADATA in {k.api_key for k in versions.api_keys}
        meta = conn.receive()
        assert isinstance(meta, MetadataResponse)
        assert [b.port for b in meta.brokers] == [served.proc.port]


@pytest.mark.parametrize("mechanism", ["SCRAM-SHA-512", "PLAIN"])
def test_sasl_login_then_requests(served: _Broker, mechanism: str) -> None:
    security = _sasl(mechanism, "alice-secret")
    with KafkaConnection("127.0.0.1", served.sasl_port, "client-test", 10, security) as conn:
        meta = conn.call(MetadataRequest[8](topics=None, allow_auto_topic_creation=False))
        assert [b.port for b in meta.brokers] == [served.sasl_port]


@pytest.mark.parametrize("mechanism", ["SCRAM-SHA-512", "PLAIN"])
def test_wrong_password_fails_at_once(served: _Broker, mechanism: str) -> None:
    started = time.monotonic()
    with pytest.raises(SaslAuthenticationFailedError, match="alice"):
        KafkaConnection("127.0.0.1", served.sasl_port, "client-test", 30, _sasl(mechanism, "no"))
    assert time.monotonic() - started < 5  # answered, not waited out (timeout 30 s)


def test_security_settings_are_checked_before_connecting() -> None:
    with pytest.raises(UnsupportedSaslMechanismError):
        ClientSecurity({"security.protocol": "SASL_SSL", "sasl.mechanism": "GSSAPI"})
    assert not client_supports({"security.protocol": "SASL_SSL", "sasl.mechanism": "GSSAPI"})
    assert not client_supports({"bootstrap.servers": "h:1", "fetch.wait.max.ms": "10"})
    assert client_supports({"bootstrap.servers": "h:1", "security.protocol": "sasl_ssl",
                            "sasl.mechanism": "scram-sha-256"})  # fmt: skip


def test_split_host_port() -> None:
    assert split_host_port(" kafka:9093 ") == ("kafka", 9093)
    assert split_host_port("kafka") == ("kafka", 9092)
    assert split_host_port("[::1]:9094") == ("::1", 9094)
    assert split_host_port(":9095") == ("127.0.0.1", 9095)
    # the broker's listeners and --*-listen flags use the same parser
    assert split_host_port("", 8080) == ("127.0.0.1", 8080)
    assert split_host_port("0.0.0.0", 0) == ("0.0.0.0", 0)
    assert split_host_port("[::]:8081", 1) == ("::", 8081)
    for bad in ("kafka:", "kafka:x", "kafka:65536", "kafka:-1"):
        with pytest.raises(ValueError):  # noqa: PT011 (int()'s message or the range's)
            split_host_port(bad)
