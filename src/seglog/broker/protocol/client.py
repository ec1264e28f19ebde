"""A blocking Kafka wire client connection: the client side of ``protocol.framing``.

One :class:`KafkaConnection` is one TCP socket to one broker (Kafka's or ``seglog serve``),
optionally TLS, optionally SASL-authenticated. Requests and responses are kafka-python's
generic schema classes (``kafka.protocol``): a versioned request instance goes out framed
(``size:int32`` = :data:`~seglog.broker.protocol.framing.FRAME_SIZE`, ``RequestHeader``,
body; each with the next correlation id), and its response is decoded with the matching
response class at the same version, the response header parsed by the broker's own
``framing.parse_response_header`` (v1 for flexible versions, v0 for ApiVersions). Requests
may be pipelined: ``send`` several, then ``receive`` answers them oldest first (Kafka
answers in order on a connection).

Users: Spark's raw wire reader and sink (``seglog.spark._fetch``, ``_produce_raw``), which
keep it instead of a confluent-kafka client because record batches pass through it whole
(~13x faster reads, measured there), and the broker's tests.

Security, from librdkafka-named options (:data:`CLIENT_OPTIONS`; :class:`ClientSecurity`):

- ``security.protocol``: PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL (any case).
- TLS with the standard library's ``ssl``, librdkafka's defaults: TLS >= 1.2, the system
  CAs unless ``ssl.ca.location`` (a PEM file or a directory of them), a client certificate
  with ``ssl.certificate.location`` / ``ssl.key.location`` / ``ssl.key.password``, the
  broker's hostname checked unless ``ssl.endpoint.identification.algorithm=none``, no
  verification at all with ``enable.ssl.certificate.verification=false``.
- SASL PLAIN / SCRAM-SHA-256 / SCRAM-SHA-512 (``sasl.mechanism``, ``sasl.username``,
  ``sasl.password``) through SaslHandshake v1 + SaslAuthenticate v2 with kafka-python's
  own SASL mechanisms (``kafka.net.sasl``), as kafka-python's client authenticates.

Errors: ``OSError`` (``ConnectionError``, ``socket.timeout``, ``ssl.SSLError``) when the
broker cannot be reached, the TLS handshake fails, a read or write exceeds ``timeout_s``,
or the broker closes the connection; ``ConnectionError`` too for a response that is not
the one expected (correlation id mismatch, malformed header). ``kafka.errors`` classes for
security: ``UnsupportedSaslMechanismError`` (a mechanism the client or the broker lacks),
``KafkaConfigurationError`` (SASL without a username or password) and
``SaslAuthenticationFailedError`` with the broker's message when it refuses the login, at
once (no retries). Error codes inside responses are the caller's to check.
"""

from __future__ import annotations

import socket
import ssl
from collections import deque
from collections.abc import Mapping
from pathlib import Path
from types import TracebackType
from typing import Any

from kafka.errors import (
    KafkaConfigurationError,
    SaslAuthenticationFailedError,
    UnsupportedSaslMechanismError,
)
from kafka.net.sasl import get_sasl_mechanism
from kafka.protocol.metadata import MetadataRequest
from kafka.protocol.sasl import SaslAuthenticateRequest, SaslHandshakeRequest

from seglog.broker.protocol.framing import (
    FRAME_SIZE,
    parse_response_header,
    response_header_flexible,
)
from seglog.errors import ProtocolError

__all__ = [
    "CLIENT_OPTIONS",
    "SASL_MECHANISMS",
    "SECURITY_PROTOCOLS",
    "ClientSecurity",
    "KafkaConnection",
    "client_supports",
    "decode_response",
    "encode_request",
    "read_frame",
]

CLIENT_OPTIONS = frozenset(
    {
        "bootstrap.servers",
        "client.id",
        "security.protocol",
        "sasl.mechanism",
        "sasl.username",
        "sasl.password",
        "ssl.ca.location",
        "ssl.certificate.location",
        "ssl.key.location",
        "ssl.key.password",
        "ssl.endpoint.identification.algorithm",
        "enable.ssl.certificate.verification",
    }
)
"""The client options (librdkafka's names) this client honours: the bootstrap address,
the client id, and the security settings :class:`ClientSecurity` reads."""

SECURITY_PROTOCOLS = frozenset({"PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"})
"""``security.protocol`` values (upper case) the client speaks."""

SASL_MECHANISMS = frozenset({"PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"})
"""``sasl.mechanism`` values (upper case) the client authenticates with."""


def client_supports(options: Mapping[str, str]) -> bool:
    """Whether this client can serve every one of ``options`` (librdkafka names): only
    names of :data:`CLIENT_OPTIONS`, a known security protocol and, with SASL, a mechanism
    of :data:`SASL_MECHANISMS` (GSSAPI, OAUTHBEARER, PKCS#12 keystores... are not)."""
    protocol = options.get("security.protocol", "PLAINTEXT").upper()
    if not set(options) <= CLIENT_OPTIONS or protocol not in SECURITY_PROTOCOLS:
        return False
    if not protocol.startswith("SASL"):
        return True
    return options.get("sasl.mechanism", "").upper() in SASL_MECHANISMS


class ClientSecurity:
    """TLS and SASL settings of a connection, from librdkafka-named options (see the module
    doc; the other names of ``options`` are ignored). An empty mapping is PLAINTEXT.

    Raises ``UnsupportedSaslMechanismError`` for a mechanism outside
    :data:`SASL_MECHANISMS`, ``KafkaConfigurationError`` for SASL without a username or
    password, ``ssl.SSLError`` / ``OSError`` for unreadable certificate files."""

    def __init__(self, options: Mapping[str, str]) -> None:
        self.protocol = options.get("security.protocol", "PLAINTEXT").upper()
        self.mechanism = options.get("sasl.mechanism", "GSSAPI").upper()
        self.username = options.get("sasl.username")
        self.password = options.get("sasl.password")
        self.context: ssl.SSLContext | None = None
        if self.protocol in ("SSL", "SASL_SSL"):
            self.context = _ssl_context(options)
        if self.sasl:
            if self.mechanism not in SASL_MECHANISMS:
                raise UnsupportedSaslMechanismError(f"SASL mechanism {self.mechanism}")
            if self.username is None or self.password is None:
                raise KafkaConfigurationError(
                    f"SASL {self.mechanism} needs sasl.username and sasl.password"
                )

    @property
    def sasl(self) -> bool:
        """Whether connections authenticate with SASL."""
        return self.protocol.startswith("SASL")


def _ssl_context(options: Mapping[str, str]) -> ssl.SSLContext:
    """librdkafka's defaults: TLS >= 1.2 (as the broker's listeners, ``security.tls``), the
    system CAs unless ``ssl.ca.location``, the broker's hostname checked unless
    ``ssl.endpoint.identification.algorithm=none``."""
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.minimum_version = ssl.TLSVersion.TLSv1_2
    verify = options.get("enable.ssl.certificate.verification", "true").lower() != "false"
    algorithm = options.get("ssl.endpoint.identification.algorithm", "https").lower()
    ctx.check_hostname = verify and algorithm == "https"
    if not verify:
        ctx.verify_mode = ssl.CERT_NONE
    ca = options.get("ssl.ca.location")
    if ca and ca != "probe":
        if Path(ca).is_dir():
            ctx.load_verify_locations(capath=ca)
        else:
            ctx.load_verify_locations(cafile=ca)
    else:
        ctx.load_default_certs()
    cert = options.get("ssl.certificate.location")
    if cert:
        ctx.load_cert_chain(
            cert, options.get("ssl.key.location") or None, options.get("ssl.key.password")
        )
    return ctx


def encode_request(request: Any, correlation_id: int, client_id: str | None) -> bytes:
    """``request`` (a versioned kafka-python request instance) framed for the wire: size,
    ``RequestHeader`` with ``correlation_id`` and ``client_id``, body."""
    request.with_header(correlation_id=correlation_id, client_id=client_id)
    payload = request.encode(header=True)
    return FRAME_SIZE.pack(len(payload)) + bytes(payload)


def decode_response(frame: bytes | memoryview, request: Any) -> tuple[int, Any]:
    """``(correlation_id, response)`` of a response ``frame`` (the payload after the size)
    answering ``request``: decoded with its response class at its version.

    Raises ``ProtocolError`` when the frame is shorter than its header; kafka-python's
    decoder raises on a body that does not match the schema."""
    response = request.header.get_response_class()
    version = request.API_VERSION
    flexible = response_header_flexible(request.API_KEY, response.flexible_version_q(version))
    correlation_id, body = parse_response_header(memoryview(frame), flexible)
    return correlation_id, response.decode(frame[body:], version=version)


def read_frame(sock: socket.socket) -> bytes:
    """The next frame's payload (after its size) from ``sock``. ConnectionError when the
    peer closes the connection first or sends a negative size; OSError from the socket."""
    (size,) = FRAME_SIZE.unpack(_exactly(sock, FRAME_SIZE.size))
    if size < 0:
        raise ConnectionError(f"frame of negative size {size}")
    return _exactly(sock, size)


def _exactly(sock: socket.socket, n: int) -> bytes:
    buf = bytearray(n)
    view = memoryview(buf)
    while view:
        got = sock.recv_into(view)
        if not got:
            raise ConnectionError("connection closed by the broker")
        view = view[got:]
    return bytes(buf)


class KafkaConnection:
    """A connection to ``host:port``, TLS-wrapped and SASL-authenticated as ``security``
    says (PLAINTEXT without it) before the constructor returns; ``timeout_s`` bounds the
    connect and every later socket read or write. Raises as the module doc says."""

    def __init__(
        self,
        host: str,
        port: int,
        client_id: str | None = None,
        timeout_s: float = 30.0,
        security: ClientSecurity | None = None,
    ) -> None:
        self.client_id = client_id
        self.correlation_id = 0
        self._sent: deque[tuple[int, Any]] = deque()
        """(correlation id, request) of the requests sent and not yet answered, oldest first."""
        self.sock: socket.socket = socket.create_connection((host, port), timeout_s)
        try:
            if security is not None and security.context is not None:
                self.sock = security.context.wrap_socket(self.sock, server_hostname=host)
            if security is not None and security.sasl:
                self._authenticate(security, host, port)
        except BaseException:
            self.sock.close()
            raise

    def _authenticate(self, security: ClientSecurity, host: str, port: int) -> None:
        """SaslHandshake v1, then SaslAuthenticate v2 until the mechanism is done.
        SaslAuthenticationFailedError with the broker's message when it refuses."""
        handshake = self.call(SaslHandshakeRequest[1](mechanism=security.mechanism))
        if handshake.error_code:
            raise UnsupportedSaslMechanismError(
                f"{host}:{port} does not offer SASL {security.mechanism} "
                f"(it offers {', '.join(handshake.mechanisms) or 'none'})"
            )
        mechanism = get_sasl_mechanism(security.mechanism)(
            host=host,
            security_protocol=security.protocol,
            sasl_mechanism=security.mechanism,
            sasl_plain_username=security.username,
            sasl_plain_password=security.password,
        )
        while not mechanism.is_done():
            answer = self.call(SaslAuthenticateRequest[2](auth_bytes=mechanism.auth_bytes()))
            if answer.error_code:
                raise SaslAuthenticationFailedError(
                    f"SASL {security.mechanism} authentication of user {security.username!r} "
                    f"at {host}:{port} failed: {answer.error_message or answer.error_code}"
                )
            mechanism.receive(bytes(answer.auth_bytes or b""))
        if not mechanism.is_authenticated():
            raise SaslAuthenticationFailedError(
                f"SASL {security.mechanism} authentication at {host}:{port} failed"
            )

    def call(self, request: Any) -> Any:
        """Send ``request`` and return its decoded response."""
        self.send(request)
        return self.receive()

    def send(self, request: Any, tail: memoryview | bytes | None = None) -> int:
        """Send ``request`` without waiting for its answer (``receive`` reads answers in
        the order requests were sent, as Kafka answers on one connection); returns its
        correlation id.

        ``tail``: the value of the request's last field, a non-flexible ``bytes`` field
        the request was built with empty (a Produce v3-v8 request of one partition's
        records): spliced in as sent, not copied by kafka-python's encoder (three copies
        of every record batch: measured, see ``seglog.spark._produce_raw``)."""
        self.correlation_id += 1
        if tail is None:
            self.sock.sendall(encode_request(request, self.correlation_id, self.client_id))
        else:  # the empty field's length (last 4 bytes) replaced by the tail's
            framed = encode_request(request, self.correlation_id, self.client_id)
            size = len(framed) - FRAME_SIZE.size + len(tail)
            head = b"".join(
                (FRAME_SIZE.pack(size), framed[FRAME_SIZE.size : -4], FRAME_SIZE.pack(len(tail)))
            )
            self._send_parts(head, memoryview(tail).cast("B"))
        self._sent.append((self.correlation_id, request))
        return self.correlation_id

    def _send_parts(self, head: bytes, body: memoryview) -> None:
        if isinstance(self.sock, ssl.SSLSocket):  # no sendmsg over TLS: it copies anyway
            self.sock.sendall(head + body)
            return
        parts = [memoryview(head), body]
        while parts:
            sent = self.sock.sendmsg(parts)
            while parts and sent >= len(parts[0]):
                sent -= len(parts[0])
                parts.pop(0)
            if parts and sent:
                parts[0] = parts[0][sent:]

    def receive(self) -> Any:
        """The decoded answer to the oldest request sent and not yet answered."""
        correlation_id, request = self._sent.popleft()
        try:
            answered, response = decode_response(read_frame(self.sock), request)
        except ProtocolError as exc:
            raise ConnectionError(f"malformed response: {exc}") from exc
        if answered != correlation_id:
            raise ConnectionError("response to another request (correlation id mismatch)")
        return response

    def topic_metadata(self, topic: str, *, auto_create: bool) -> Any:
        """MetadataResponse v8 for ``topic`` (error codes unchecked); ``auto_create``: ask
        the broker to create it if missing (as Kafka producers do;
        ``auto.create.topics.enable`` decides)."""
        req = MetadataRequest[8]
        return self.call(
            req(
                topics=[req.MetadataRequestTopic(name=topic)],
                allow_auto_topic_creation=auto_create,
                include_cluster_authorized_operations=False,
                include_topic_authorized_operations=False,
            )
        )

    def close(self) -> None:
        """Close the socket (unanswered requests are dropped)."""
        self.sock.close()

    def __enter__(self) -> KafkaConnection:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()
