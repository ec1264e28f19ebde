"""``kafka.*`` security options as Spark users write them, in librdkafka's names.

Spark's Kafka source passes ``kafka.*`` to the Java client, so users write Java names
(``kafka.sasl.jaas.config``, ``kafka.ssl.truststore.location``); Python users know
librdkafka's (``kafka.ssl.ca.location``, ``kafka.sasl.username``) or kafka-python's
(``kafka.ssl.cafile``, ``kafka.sasl.plain.username``). ``client_options`` turns all of
them into librdkafka's names, which confluent-kafka takes as they are and the raw fetcher
and sink (``_fetch``, ``_produce_raw``) pass to the broker's wire client
(``seglog.broker.ClientSecurity``). Accepted:

- ``security.protocol``: PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL (any case).
- ``sasl.mechanism`` (librdkafka also ``sasl.mechanisms``): PLAIN, SCRAM-SHA-256,
  SCRAM-SHA-512.
- ``sasl.jaas.config``: ``org.apache.kafka.common.security.scram.ScramLoginModule required
  username="u" password="p";`` (or ``...plain.PlainLoginModule``, which implies PLAIN) →
  ``sasl.username`` / ``sasl.password``; other login modules are refused.
- ``sasl.username`` / ``sasl.password`` (kafka-python: ``sasl.plain.username`` /
  ``sasl.plain.password``).
- ``ssl.ca.location`` (kafka-python ``ssl.cafile``; Java ``ssl.truststore.location`` only
  with ``ssl.truststore.type=PEM``: a JKS/PKCS12 truststore is refused with a hint).
- ``ssl.certificate.location`` / ``ssl.key.location`` / ``ssl.key.password`` (kafka-python
  ``ssl.certfile`` / ``ssl.keyfile`` / ``ssl.password``; Java ``ssl.keystore.location``
  with ``ssl.keystore.type=PEM`` sets both from one file).
- ``ssl.endpoint.identification.algorithm``: ``https`` (default) or ``none`` (Java's empty
  string means none).

Every other ``kafka.*`` option passes through unchanged to librdkafka.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from confluent_kafka import KafkaError, KafkaException
from kafka.errors import SaslAuthenticationFailedError

__all__ = ["ALIASES", "ClientErrors", "client_options", "parse_jaas_config"]

ALIASES = {
    "ssl.cafile": "ssl.ca.location",
    "ssl.certfile": "ssl.certificate.location",
    "ssl.keyfile": "ssl.key.location",
    "ssl.password": "ssl.key.password",
    "sasl.plain.username": "sasl.username",
    "sasl.plain.password": "sasl.password",
    "sasl.mechanisms": "sasl.mechanism",
}
"""kafka-python's (and librdkafka's alternative) names → librdkafka's names."""

_LOGIN_MODULES = {
    "org.apache.kafka.common.security.scram.ScramLoginModule": "SCRAM",
    "org.apache.kafka.common.security.plain.PlainLoginModule": "PLAIN",
}
_JAAS = re.compile(r"\s*(?P<module>[\w.$]+)\s+(?P<flag>required|requisite|sufficient|optional)\s*"
                   r"(?P<options>.*?)\s*;?\s*$", re.DOTALL)  # fmt: skip
_JAAS_OPTION = re.compile(r'\s*([\w.-]+)\s*=\s*(?:"((?:[^"\\]|\\.)*)"|([^\s";]+))')


def parse_jaas_config(text: str) -> tuple[str, dict[str, str]]:
    """``(kind, options)`` of a one-module JAAS line, kind ``SCRAM`` or ``PLAIN``.

    ValueError (naming the option, never the password) for other login modules or text
    that is not ``Module required key="value" ...;``."""
    match = _JAAS.fullmatch(text)
    if match is None:
        raise ValueError(
            "option kafka.sasl.jaas.config must read like "
            '\'org.apache.kafka.common.security.scram.ScramLoginModule required username="u" '
            'password="p";\''
        )
    module = match.group("module")
    if module not in _LOGIN_MODULES:
        raise ValueError(
            f"option kafka.sasl.jaas.config: login module {module} is not supported "
            f"(only {' and '.join(sorted(_LOGIN_MODULES))})"
        )
    options: dict[str, str] = {}
    rest = match.group("options")
    pos = 0
    while pos < len(rest):
        item = _JAAS_OPTION.match(rest, pos)
        if item is None:
            if rest[pos:].strip(" \t\r\n;"):
                raise ValueError(
                    'option kafka.sasl.jaas.config: expected key="value" pairs after '
                    f"{module} {match.group('flag')}"
                )
            break
        quoted, bare = item.group(2), item.group(3)
        value = re.sub(r"\\(.)", r"\1", quoted) if quoted is not None else bare
        options[item.group(1)] = value
        pos = item.end()
    return _LOGIN_MODULES[module], options


def _set(result: dict[str, str], name: str, value: str, source: str) -> None:
    if name in result and result[name] != value:
        raise ValueError(f"options kafka.{source} and kafka.{name} disagree: give one of them")
    result[name] = value


def client_options(kafka: Mapping[str, str]) -> dict[str, str]:
    """``kafka.*`` options (prefix removed) with the security names librdkafka knows.

    Raises ValueError naming the option for a refused login module, a Java keystore file,
    or two names of one setting with different values."""
    result = {k.lower(): v for k, v in kafka.items()}
    for alias, name in ALIASES.items():
        if alias in result:
            _set(result, name, result.pop(alias), alias)
    jaas = result.pop("sasl.jaas.config", None)
    if jaas is not None:
        kind, options = parse_jaas_config(jaas)
        for key in ("username", "password"):
            if key not in options:
                raise ValueError(f"option kafka.sasl.jaas.config has no {key}")
            _set(result, f"sasl.{key}", options[key], "sasl.jaas.config")
        mechanism = result.get("sasl.mechanism", "").upper()
        if kind == "PLAIN" and not mechanism:
            result["sasl.mechanism"] = "PLAIN"
        elif not mechanism.startswith(kind):
            raise ValueError(
                f"option kafka.sasl.jaas.config names a {kind} login module: set "
                + (
                    "kafka.sasl.mechanism to SCRAM-SHA-256 or SCRAM-SHA-512"
                    if kind == "SCRAM"
                    else "kafka.sasl.mechanism to PLAIN"
                )
                + (f" (not {mechanism})" if mechanism else "")
            )
    _java_stores(result)
    if result.get("ssl.endpoint.identification.algorithm") == "":
        result["ssl.endpoint.identification.algorithm"] = "none"
    for name in ("security.protocol", "sasl.mechanism"):
        if name in result:
            result[name] = result[name].strip().upper()
    return result


def _java_stores(result: dict[str, str]) -> None:
    """Java's truststore / keystore options: PEM files map to librdkafka's names, JKS is
    refused (no Python client reads it), a PKCS#12 keystore passes to librdkafka."""
    store_type = result.pop("ssl.truststore.type", "JKS").strip().upper()
    location = result.pop("ssl.truststore.location", None)
    result.pop("ssl.truststore.password", None)
    if location is not None:
        if store_type != "PEM":
            raise ValueError(
                f"option kafka.ssl.truststore.location is a Java {store_type} truststore, which "
                "Python Kafka clients cannot read: give the CA certificate(s) as a PEM file with "
                "kafka.ssl.ca.location (or kafka.ssl.cafile), or set kafka.ssl.truststore.type "
                "to PEM"
            )
        _set(result, "ssl.ca.location", location, "ssl.truststore.location")
    key_type = result.pop("ssl.keystore.type", "").strip().upper()
    if key_type == "PEM" and "ssl.keystore.location" in result:
        pem = result.pop("ssl.keystore.location")
        _set(result, "ssl.certificate.location", pem, "ssl.keystore.location")
        _set(result, "ssl.key.location", pem, "ssl.keystore.location")
        password = result.pop("ssl.keystore.password", None)
        if password is not None:
            _set(result, "ssl.key.password", password, "ssl.keystore.password")
    elif key_type == "JKS":
        raise ValueError(
            "option kafka.ssl.keystore.location is a Java JKS keystore, which Python Kafka "
            "clients cannot read: give kafka.ssl.certificate.location and kafka.ssl.key.location "
            "(PEM) or a PKCS12 keystore"
        )


class ClientErrors:
    """A confluent-kafka ``error_cb`` that remembers authentication and TLS failures.

    librdkafka retries a refused login forever (reconnecting every few ms) and only tells
    ``error_cb``, served by ``poll``/``consume``/``flush``: a call with a timeout just
    times out with ``_TRANSPORT``. Clients made with ``settings(...)`` call ``check()``
    between short waits and so fail within about a second with the broker's reason."""

    def __init__(self) -> None:
        self.failure: Any = None

    def __call__(self, error: Any) -> None:
        if self.failure is None and (
            error.code() in (KafkaError._AUTHENTICATION, KafkaError._SSL) or error.fatal()
        ):
            self.failure = error

    def settings(self, kafka: Mapping[str, str], **defaults: Any) -> dict[str, Any]:
        """``defaults``, then ``kafka``, with this object as the error callback."""
        return {**defaults, **kafka, "error_cb": self}

    def check(self, what: str) -> None:
        """SaslAuthenticationFailedError (an authentication failure) or KafkaException
        (TLS, fatal errors) naming ``what`` if the client reported one."""
        if self.failure is None:
            return
        if self.failure.code() == KafkaError._AUTHENTICATION:
            raise SaslAuthenticationFailedError(f"{what}: {self.failure.str()}")
        raise KafkaException(self.failure)
