"""TLS and SASL listeners through real clients: confluent-kafka (librdkafka) and
kafka-python over SSL, SASL_SSL (SCRAM-SHA-256/512) and SASL_PLAINTEXT (PLAIN); wrong
passwords, TLS 1.1 and unauthenticated requests refused while the broker keeps serving."""

from __future__ import annotations

import contextlib
import shutil
import socket
import ssl
import subprocess
import urllib.request
import warnings
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient
from kafka import KafkaProducer
from prometheus_client.parser import text_string_to_metric_families
from tests._security import SEGLOG, add_users, sasl_conf, server_cert

from seglog.broker import BrokerProcess, free_port, start_broker

from ._wire import Wire


class Secured:
    """A broker with PLAINTEXT, SSL, SASL_SSL and SASL_PLAINTEXT listeners."""

    def __init__(self, proc: BrokerProcess, ports: dict[str, int], ca: Path, client: Path) -> None:
        self.proc = proc
        self.ports = ports
        self.ca = ca
        self.client_pem = client

    def conf(self, protocol: str, **extra: Any) -> dict[str, Any]:
        conf: dict[str, Any] = {
            "bootstrap.servers": f"127.0.0.1:{self.ports[protocol]}",
            "security.protocol": protocol,
            **extra,
        }
        if protocol in ("SSL", "SASL_SSL"):
            conf["ssl.ca.location"] = str(self.ca)
        return conf

    def sasl(
        self, protocol: str, user: str, password: str, mechanism: str = "SCRAM-SHA-256"
    ) -> dict[str, Any]:
        """:meth:`conf` of a SASL listener, logging in as ``user``."""
        return self.conf(protocol, **sasl_conf(user, password, mechanism, protocol))


@pytest.fixture(scope="module")
def secured(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Secured]:
    work = tmp_path_factory.mktemp("secured")
    ca = server_cert(work)
    client = ca.issue_cert("alice@example.com", common_name="alice")
    client.private_key_and_cert_chain_pem.write_to_path(str(work / "client.pem"))
    data = work / "data"
    data.mkdir()
    add_users(data, {"alice": "alice-secret", "bob": "bob-secret"})
    ports = {p: free_port() for p in ("PLAINTEXT", "SSL", "SASL_SSL", "SASL_PLAINTEXT", "METRICS")}
    listeners = ",".join(f"{p}://127.0.0.1:{port}" for p, port in ports.items() if p != "METRICS")
    proc = start_broker(
        data,
        port=ports["PLAINTEXT"],
        extra_args=[
            "--listeners", listeners,
            "--ssl-certfile", str(work / "server.pem"),
            "--ssl-cafile", str(work / "ca.pem"),
            "--ssl-client-auth", "requested",
            "--metrics-listen", f"127.0.0.1:{ports['METRICS']}",
        ],
    )  # fmt: skip
    try:
        yield Secured(proc, ports, work / "ca.pem", work / "client.pem")
    finally:
        assert proc.stop() == 0, proc.log_text()
        assert "Traceback" not in proc.log_text()


def _round_trip(conf: dict[str, Any], topic: str) -> None:
    producer = Producer(conf)
    producer.produce(topic, value=b"secret payload")
    assert producer.flush(15) == 0
    consumer = Consumer({**conf, "group.id": f"{topic}-g"})
    consumer.assign([TopicPartition(topic, 0, 0)])
    try:
        msg = consumer.poll(15)
        assert msg is not None
        assert msg.error() is None
        assert msg.value() == b"secret payload"
    finally:
        consumer.close()


def test_tls_round_trip_and_client_certificate(secured: Secured) -> None:
    _round_trip(secured.conf("SSL"), "over-tls")
    with_cert = secured.conf(
        "SSL",
        **{
            "ssl.certificate.location": str(secured.client_pem),
            "ssl.key.location": str(secured.client_pem),
        },
    )
    _round_trip(with_cert, "over-mtls")
    assert "TLS client User:CN=alice" in secured.proc.log_text()


def _handshake(secured: Secured, highest: ssl.TLSVersion) -> str:
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.load_verify_locations(str(secured.ca))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)  # naming TLS 1.1 warns
        ctx.minimum_version = ssl.TLSVersion.MINIMUM_SUPPORTED
        ctx.maximum_version = highest
    raw = socket.create_connection(("127.0.0.1", secured.ports["SSL"]), timeout=10)
    with raw, ctx.wrap_socket(raw, server_hostname="127.0.0.1") as tls:
        return str(tls.version())


def test_tls_1_1_is_refused(secured: Secured) -> None:
    assert _handshake(secured, ssl.TLSVersion.TLSv1_2) == "TLSv1.2"  # the control
    with pytest.raises(ssl.SSLError):
        _handshake(secured, ssl.TLSVersion.TLSv1_1)


@pytest.mark.parametrize("mechanism", ["SCRAM-SHA-256", "SCRAM-SHA-512", "PLAIN"])
def test_sasl_ssl_mechanisms(secured: Secured, mechanism: str) -> None:
    conf = secured.sasl("SASL_SSL", "alice", "alice-secret", mechanism)
    _round_trip(conf, f"sasl-{mechanism.lower()}")


def test_wrong_password_fails_and_others_are_served(secured: Secured) -> None:
    bad = secured.sasl("SASL_SSL", "alice", "nope", "SCRAM-SHA-256")
    admin = AdminClient(bad)
    with pytest.raises(KafkaException) as info:
        admin.list_topics(timeout=10)
    assert "uthentication" in str(info.value) or info.value.args[0].code() != 0
    assert "authentication failed" in secured.proc.log_text()
    assert "nope" not in secured.proc.log_text()  # never a password in the log
    with urllib.request.urlopen(f"http://127.0.0.1:{secured.ports['METRICS']}/metrics") as resp:
        families = {f.name: f for f in text_string_to_metric_families(resp.read().decode())}
    failures = {
        s.labels["mechanism"]: s.value
        for s in families["seglog_authentication_failures"].samples
        if s.name.endswith("_total")
    }
    assert failures.get("SCRAM-SHA-256", 0) >= 1
    listeners = {s.labels["listener"] for s in families["seglog_connections"].samples}
    assert listeners == {"PLAINTEXT", "SSL", "SASL_SSL", "SASL_PLAINTEXT"}
    unknown = secured.sasl("SASL_PLAINTEXT", "mallory", "x", "PLAIN")
    with pytest.raises(KafkaException):
        AdminClient(unknown).list_topics(timeout=10)
    _round_trip(secured.conf("PLAINTEXT"), "still-serving")


def test_kafka_python_sasl_plaintext_scram(secured: Secured) -> None:
    producer = KafkaProducer(
        bootstrap_servers=f"127.0.0.1:{secured.ports['SASL_PLAINTEXT']}",
        security_protocol="SASL_PLAINTEXT",
        sasl_mechanism="SCRAM-SHA-512",
        sasl_plain_username="bob",
        sasl_plain_password="bob-secret",
    )
    try:
        producer.send("kp-sasl", b"from kafka-python").get(timeout=15)
    finally:
        producer.close()
    conf = secured.sasl("SASL_PLAINTEXT", "bob", "bob-secret", "PLAIN")
    consumer = Consumer({**conf, "group.id": "kp"})
    consumer.assign([TopicPartition("kp-sasl", 0, 0)])
    try:
        msg = consumer.poll(15)
        assert msg is not None
        assert msg.value() == b"from kafka-python"
    finally:
        consumer.close()


def test_requests_before_authentication_close_the_connection(secured: Secured) -> None:
    from kafka.protocol.metadata import MetadataRequest  # noqa: PLC0415

    with Wire(f"127.0.0.1:{secured.ports['SASL_PLAINTEXT']}") as w:
        w.send(MetadataRequest[8](topics=None, allow_auto_topic_creation=False))
        with pytest.raises((ConnectionError, OSError, EOFError, AssertionError)):
            w.recv_frame()
    # Metadata on each listener advertises that listener's own port
    for protocol in ("PLAINTEXT", "SSL"):
        meta = AdminClient(secured.conf(protocol)).list_topics(timeout=10)
        assert [b.port for b in meta.brokers.values()] == [secured.ports[protocol]]


def test_sessions_never_expire_by_default(secured: Secured) -> None:
    from kafka.protocol.metadata import MetadataRequest  # noqa: PLC0415
    from kafka.protocol.sasl import SaslAuthenticateRequest, SaslHandshakeRequest  # noqa: PLC0415

    with Wire(f"127.0.0.1:{secured.ports['SASL_PLAINTEXT']}") as w:
        assert w.call(SaslHandshakeRequest[1](mechanism="PLAIN")).error_code == 0
        done = w.call(SaslAuthenticateRequest[2](auth_bytes=b"\0alice\0alice-secret"))
        assert (done.error_code, done.session_lifetime_ms) == (0, 0)  # no re-authentication
        assert w.call(SaslHandshakeRequest[1](mechanism="PLAIN")).error_code == 34
        meta = w.call(MetadataRequest[8](topics=None, allow_auto_topic_creation=False))
        assert len(meta.brokers) == 1  # the connection is still served


AUTHZID_REFUSED = (
    "Authentication failed: Client requested an authorization id that is different from username"
)


def _sasl(secured: Secured, mechanism: str) -> Wire:
    from kafka.protocol.sasl import SaslHandshakeRequest  # noqa: PLC0415

    w = Wire(f"127.0.0.1:{secured.ports['SASL_PLAINTEXT']}")
    assert w.call(SaslHandshakeRequest[1](mechanism=mechanism)).error_code == 0
    return w


def _authenticate(w: Wire, token: bytes) -> tuple[int, str | None]:
    from kafka.protocol.sasl import SaslAuthenticateRequest  # noqa: PLC0415

    resp = w.call(SaslAuthenticateRequest[2](auth_bytes=token))
    return resp.error_code, resp.error_message


def _served(w: Wire) -> bool:
    from kafka.protocol.metadata import MetadataRequest  # noqa: PLC0415

    meta = w.call(MetadataRequest[8](topics=None, allow_auto_topic_creation=False))
    return len(meta.brokers) == 1


def test_plain_authorization_id_must_be_the_user(secured: Secured) -> None:
    """PLAIN (RFC 4616) with an authorization id: the user's own is accepted, another is
    58 with Kafka's message and the connection is closed; bad credentials are refused
    as such first."""
    with _sasl(secured, "PLAIN") as w:
        assert _authenticate(w, b"alice\0alice\0alice-secret") == (0, None)
        assert _served(w)
    with _sasl(secured, "PLAIN") as w:
        assert _authenticate(w, b"bob\0alice\0alice-secret") == (58, AUTHZID_REFUSED)
        w.assert_closed()
    with _sasl(secured, "PLAIN") as w:
        code, message = _authenticate(w, b"bob\0alice\0wrong")
        assert (code, message) == (58, "Authentication failed: Invalid username or password")


class _Gs2Header:
    """A GS2 header with an authzid for scramp's client (scramp sends none)."""

    def __init__(self, header: str) -> None:
        self.header = header

    def make_cbind_input(self, channel_binding: object) -> bytes:
        del channel_binding
        return self.header.encode()


@pytest.mark.parametrize("mechanism", ["SCRAM-SHA-256", "SCRAM-SHA-512"])
def test_scram_authorization_id_must_be_the_user(secured: Secured, mechanism: str) -> None:
    """SCRAM (RFC 5802) with ``a=`` in the GS2 header: the user's own completes the
    exchange (the client-final binds the header as sent), another is 58 with Kafka's
    message at the client-first and the connection is closed."""
    import scramp  # noqa: PLC0415

    def client_first(authzid: str) -> tuple[Any, bytes]:
        client = scramp.ScramClient([mechanism], "alice", "alice-secret")
        bare = client.get_client_first()[len("n,,") :]
        header = f"n,a={authzid},"
        client.gs2_header = _Gs2Header(header)  # c= in the client-final
        return client, (header + bare).encode()

    with _sasl(secured, mechanism) as w:
        client, first = client_first("alice")
        from kafka.protocol.sasl import SaslAuthenticateRequest  # noqa: PLC0415

        server_first = w.call(SaslAuthenticateRequest[2](auth_bytes=first))
        assert server_first.error_code == 0
        client.set_server_first(bytes(server_first.auth_bytes).decode())
        final = w.call(SaslAuthenticateRequest[2](auth_bytes=client.get_client_final().encode()))
        assert (final.error_code, final.error_message) == (0, None)
        client.set_server_final(bytes(final.auth_bytes).decode())  # the server's proof holds
        assert _served(w)
    with _sasl(secured, mechanism) as w:
        _client, first = client_first("bob")
        assert _authenticate(w, first) == (58, AUTHZID_REFUSED)
        w.assert_closed()


def test_users_cli(tmp_path: Path) -> None:
    run: Callable[..., subprocess.CompletedProcess[bytes]] = lambda *a: subprocess.run(  # noqa: E731
        [SEGLOG, "user", *a, "--data-dir", str(tmp_path)], capture_output=True, check=False
    )
    assert run("add", "carol", "--password", "pw-123").returncode == 0
    stored = (tmp_path / "scram-credentials.json").read_text()
    assert "pw-123" not in stored
    assert '"iterations": 8192' in stored
    listed = run("list", "--json")
    assert b'"carol": ["SCRAM-SHA-256", "SCRAM-SHA-512"]' in listed.stdout
    assert run("delete", "carol").returncode == 0
    assert run("delete", "carol").returncode == 1


def test_unauthenticated_connections_time_out(tmp_path: Path) -> None:
    plain, sasl = free_port(), free_port()
    proc = start_broker(
        tmp_path / "data",
        port=plain,
        extra_args=[
            "--listeners", f"PLAINTEXT://127.0.0.1:{plain},SASL_PLAINTEXT://127.0.0.1:{sasl}",
            "--sasl-authentication-timeout-ms", "1000",
        ],
    )  # fmt: skip
    try:
        idle = socket.create_connection(("127.0.0.1", sasl), timeout=15)
        with idle, contextlib.suppress(ConnectionResetError):
            assert idle.recv(16) == b""  # closed after the deadline, never authenticated
        assert "not authenticated in time" in proc.log_text()
    finally:
        assert proc.stop() == 0


def test_scram_credentials_over_the_wire(secured: Secured) -> None:
    from confluent_kafka.admin import (  # noqa: PLC0415
        ScramCredentialInfo,
        ScramMechanism,
        UserScramCredentialDeletion,
        UserScramCredentialUpsertion,
    )

    admin = AdminClient(secured.conf("PLAINTEXT"))
    info = ScramCredentialInfo(ScramMechanism.SCRAM_SHA_256, 4096)
    upsert = UserScramCredentialUpsertion("dave", info, b"dave-secret")
    for future in admin.alter_user_scram_credentials([upsert]).values():
        future.result(15)
    described = admin.describe_user_scram_credentials(["dave"])["dave"].result(15)
    assert [(c.mechanism, c.iterations) for c in described.scram_credential_infos] == [
        (ScramMechanism.SCRAM_SHA_256, 4096)
    ]
    dave = secured.sasl("SASL_PLAINTEXT", "dave", "dave-secret")
    _round_trip(dave, "dave-topic")  # the new credential logs in at once
    assert "dave-secret" not in (secured.proc.data_dir / "scram-credentials.json").read_text()

    delete = UserScramCredentialDeletion("dave", ScramMechanism.SCRAM_SHA_256)
    for future in admin.alter_user_scram_credentials([delete]).values():
        future.result(15)
    refused = AdminClient(dave)
    with pytest.raises(KafkaException):
        refused.list_topics(timeout=10)
    with pytest.raises(KafkaException) as missing:
        admin.describe_user_scram_credentials(["dave"])["dave"].result(15)
    assert missing.value.args[0].code() == 91  # RESOURCE_NOT_FOUND


def _kcat(secured: Secured, protocol: str, mechanism: str, password: str) -> list[str]:
    args = [
        "kcat", "-b", f"127.0.0.1:{secured.ports[protocol]}",
        "-X", f"security.protocol={protocol}", "-X", f"sasl.mechanisms={mechanism}",
        "-X", "sasl.username=alice", "-X", f"sasl.password={password}",
    ]  # fmt: skip
    if protocol == "SASL_SSL":
        args += ["-X", f"ssl.ca.location={secured.ca}"]
    return args


# Debian's kcat (librdkafka 2.0.2) sends a SCRAM client-final nonce of client nonce +
# server-first nonce (the client nonce twice), which the broker accepts as Kafka does
@pytest.mark.skipif(shutil.which("kcat") is None, reason="kcat is not installed")
@pytest.mark.parametrize(
    ("protocol", "mechanism"),
    [
        ("SASL_SSL", "PLAIN"),
        ("SASL_SSL", "SCRAM-SHA-256"),
        ("SASL_SSL", "SCRAM-SHA-512"),
        ("SASL_PLAINTEXT", "SCRAM-SHA-512"),
    ],
)
def test_kcat_over_sasl(secured: Secured, protocol: str, mechanism: str) -> None:
    base = [
        *_kcat(secured, protocol, mechanism, "alice-secret"),
        "-t",
        f"kcat-{protocol}-{mechanism}",
    ]
    sent = subprocess.run(
        [*base, "-P"], input=b"one\ntwo\n", capture_output=True, timeout=60, check=False
    )
    assert sent.returncode == 0, sent.stderr
    out = subprocess.run(
        [*base, "-C", "-e", "-o", "beginning", "-q"], capture_output=True, check=True, timeout=60
    )
    assert out.stdout.split() == [b"one", b"two"]


@pytest.mark.skipif(shutil.which("kcat") is None, reason="kcat is not installed")
def test_kcat_scram_wrong_password_is_refused(secured: Secured) -> None:
    args = [*_kcat(secured, "SASL_PLAINTEXT", "SCRAM-SHA-512", "not-hers"), "-L", "-m", "5"]
    listed = subprocess.run(args, capture_output=True, timeout=60, check=False)
    assert listed.returncode != 0
    assert b"Authentication failed" in listed.stderr  # the proof is still checked
    assert "not-hers" not in secured.proc.log_text()


async def test_aiokafka_over_sasl_ssl(secured: Secured) -> None:
    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer  # noqa: PLC0415
    from aiokafka.helpers import create_ssl_context  # noqa: PLC0415

    common: dict[str, Any] = {
        "bootstrap_servers": f"127.0.0.1:{secured.ports['SASL_SSL']}",
        "security_protocol": "SASL_SSL",
        "sasl_mechanism": "SCRAM-SHA-256",
        "sasl_plain_username": "bob",
        "sasl_plain_password": "bob-secret",
        "ssl_context": create_ssl_context(cafile=str(secured.ca)),
    }
    producer = AIOKafkaProducer(**common)
    await producer.start()
    try:
        await producer.send_and_wait("aio-sasl", b"from aiokafka")
    finally:
        await producer.stop()
    consumer = AIOKafkaConsumer("aio-sasl", auto_offset_reset="earliest", **common)
    await consumer.start()
    try:
        msg = await consumer.getone()
        assert msg.value == b"from aiokafka"
    finally:
        await consumer.stop()
