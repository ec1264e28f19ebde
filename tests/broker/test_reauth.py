"""KIP-368 SASL re-authentication: ``connections.max.reauth.ms`` set from a
server.properties file on a broker with a SASL_PLAINTEXT listener. confluent-kafka
(librdkafka re-authenticates on its own) keeps producing and consuming across several
re-authentications of one connection; raw clients check the session lifetime answered,
re-authentication rules (same mechanism, same principal, one per second, nothing else in
between) and that a connection which does not re-authenticate is closed at its first
request after the session expired."""

from __future__ import annotations

import re
import time
import urllib.request
from collections import Counter
from collections.abc import Iterator
from typing import Any

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, ConfigResource, ConfigSource
from kafka.protocol.metadata import ApiVersionsRequest, MetadataRequest
from kafka.protocol.sasl import SaslAuthenticateRequest, SaslHandshakeRequest
from prometheus_client.parser import text_string_to_metric_families
from tests._security import add_users, sasl_conf
from tests._wait import wait_until

from seglog.broker import BrokerProcess, free_port, start_broker

from ._wire import Wire

REAUTH_MS = 3000


class Reauth:
    """A broker with ``connections.max.reauth.ms`` = :data:`REAUTH_MS`."""

    def __init__(self, proc: BrokerProcess, sasl_port: int, metrics_port: int) -> None:
        self.proc = proc
        self.sasl = f"127.0.0.1:{sasl_port}"
        self.metrics_port = metrics_port

    def metric(self, name: str, **labels: str) -> float:
        """The sum of ``name``'s samples whose labels include ``labels`` (0 when absent)."""
        url = f"http://127.0.0.1:{self.metrics_port}/metrics"
        with urllib.request.urlopen(url, timeout=10) as resp:
            text = resp.read().decode()
        return sum(
            s.value
            for family in text_string_to_metric_families(text)
            for s in family.samples
            if s.name == name and labels.items() <= s.labels.items()
        )

    def conf(self, **extra: Any) -> dict[str, Any]:
        """confluent-kafka settings: alice over SCRAM-SHA-256 on the SASL listener."""
        return {
            "bootstrap.servers": self.sasl,
            **sasl_conf("alice", "alice-secret"),
            **extra,
        }


@pytest.fixture(scope="module")
def reauth(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Reauth]:
    work = tmp_path_factory.mktemp("reauth")
    data = work / "data"
    data.mkdir()
    add_users(data, {user: f"{user}-secret" for user in ("alice", "bob")})
    plain, sasl, metrics = free_port(), free_port(), free_port()
    props = work / "server.properties"
    props.write_text(
        f"listeners=PLAINTEXT://127.0.0.1:{plain},SASL_PLAINTEXT://127.0.0.1:{sasl}\n"
        f"connections.max.reauth.ms={REAUTH_MS}\n"
    )
    proc = start_broker(
        data,
        port=plain,
        extra_args=["--config", str(props), "--metrics-listen", f"127.0.0.1:{metrics}"],
    )
    try:
        yield Reauth(proc, sasl, metrics)
    finally:
        assert proc.stop() == 0, proc.log_text()
        assert "Traceback" not in proc.log_text()


def _authenticate(w: Wire, user: str, password: str, mechanism: str = "PLAIN") -> Any:
    """SaslHandshake v1 + SaslAuthenticate v2 (PLAIN); the SaslAuthenticate response."""
    handshake = w.call(SaslHandshakeRequest[1](mechanism=mechanism))
    assert handshake.error_code == 0
    return w.call(SaslAuthenticateRequest[2](auth_bytes=f"\0{user}\0{password}".encode()))


def _metadata_ok(w: Wire) -> bool:
    resp = w.call(MetadataRequest[8](topics=None, allow_auto_topic_creation=False))
    return len(resp.brokers) == 1


def test_reauth_config_is_described(reauth: Reauth) -> None:
    admin = AdminClient(reauth.conf())
    resource = ConfigResource(ConfigResource.Type.BROKER, "0")
    entries = admin.describe_configs([resource])[resource].result(15)
    entry = entries["connections.max.reauth.ms"]
    assert entry.value == str(REAUTH_MS)
    assert entry.source == ConfigSource.STATIC_BROKER_CONFIG.value


def test_librdkafka_keeps_working_across_reauthentications(reauth: Reauth) -> None:
    topic = "reauth-round-trips"
    producer = Producer(reauth.conf(**{"linger.ms": 0}))
    consumer = Consumer(reauth.conf(**{"group.id": "reauth-g", "fetch.wait.max.ms": 100}))
    consumer.assign([TopicPartition(topic, 0, 0)])
    pattern = re.compile(r"re-authenticated (\('127\.0\.0\.1', \d+\)) as User:alice")
    sent = received = 0

    def round_trip() -> bool:
        nonlocal sent, received
        per_connection = Counter(pattern.findall(reauth.proc.log_text()))
        if per_connection and max(per_connection.values()) >= 3:
            return True  # one connection re-authenticated three times and kept serving
        producer.produce(topic, value=b"%d" % sent)
        sent += 1
        assert producer.flush(15) == 0
        while received < sent:  # every message comes back, in order
            msg = consumer.poll(15)
            assert msg is not None
            assert msg.error() is None, msg.error()
            assert msg.value() == b"%d" % received
            received += 1
        return False

    try:
        wait_until(round_trip, timeout=60, interval=0, message=reauth.proc.log_text)
    finally:
        consumer.close()
    assert reauth.metric("seglog_reauthentications_total", mechanism="SCRAM-SHA-256") >= 3
    assert reauth.metric("seglog_expired_sessions_closed_total") == 0
    assert reauth.metric("seglog_authentication_failures_total") == 0
    assert "failed from" not in reauth.proc.log_text()


def test_session_lifetime_and_same_principal(reauth: Reauth) -> None:
    with Wire(reauth.sasl) as w:
        assert _authenticate(w, "alice", "alice-secret").session_lifetime_ms == REAUTH_MS
        again = _authenticate(w, "alice", "alice-secret")  # re-authentication
        assert (again.error_code, again.session_lifetime_ms) == (0, REAUTH_MS)
        assert _metadata_ok(w)
        # a second re-authentication within a second is refused; the connection stays
        assert w.call(SaslHandshakeRequest[1](mechanism="PLAIN")).error_code == 34
        assert _metadata_ok(w)
    with Wire(reauth.sasl) as w:  # another principal: refused and closed
        assert _authenticate(w, "alice", "alice-secret").error_code == 0
        switched = _authenticate(w, "bob", "bob-secret")
        assert switched.error_code == 58
        assert "Cannot change principals" in switched.error_message
        w.assert_closed()
    with Wire(reauth.sasl) as w:  # another mechanism: refused at SaslAuthenticate, closed
        assert _authenticate(w, "alice", "alice-secret").error_code == 0
        assert w.call(SaslHandshakeRequest[1](mechanism="SCRAM-SHA-256")).error_code == 0
        scram_first = SaslAuthenticateRequest[2](auth_bytes=b"n,,n=alice,r=abcdefgh")
        assert w.call(scram_first).error_code == 58
        w.assert_closed()
    with Wire(reauth.sasl) as w:  # any other request while re-authenticating: closed
        assert _authenticate(w, "alice", "alice-secret").error_code == 0
        assert w.call(SaslHandshakeRequest[1](mechanism="PLAIN")).error_code == 0
        w.send(MetadataRequest[8](topics=None, allow_auto_topic_creation=False))
        w.assert_closed()
    assert "MetadataRequest during SASL re-authentication" in reauth.proc.log_text()


def test_no_reauthentication_closes_at_the_first_request_after_expiry(reauth: Reauth) -> None:
    closed_before = reauth.metric("seglog_expired_sessions_closed_total")
    with Wire(reauth.sasl) as w:
        assert _authenticate(w, "bob", "bob-secret").session_lifetime_ms == REAUTH_MS
        authenticated = time.monotonic()
        served = 0

        def closed() -> bool:
            nonlocal served
            try:
                w.call(ApiVersionsRequest[0]())
            except (ConnectionError, OSError):
                return True
            served += 1
            return False

        # requests are served until the session expires, then it is closed
        wait_until(closed, timeout=REAUTH_MS / 1000 + 15, interval=0, message="never closed")
        lasted = time.monotonic() - authenticated
    assert served > 0
    assert lasted >= REAUTH_MS / 1000 - 0.5  # the broker's clock started before ours
    assert reauth.metric("seglog_expired_sessions_closed_total") == closed_before + 1
    assert "SASL session of User:bob expired" in reauth.proc.log_text()
