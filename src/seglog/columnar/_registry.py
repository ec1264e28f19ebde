"""Where typed readers and writers find schemas: a registry endpoint, or the data directory.

``RegistryRef`` (picklable, shipped to executors) names one of:

- a Confluent Schema Registry REST endpoint (``schema.registry.url``; seglog's own is served
  by ``seglog serve --schema-registry-listen``, any registry implementing the API works),
  talked to with confluent-kafka's ``SchemaRegistryClient`` (which caches by id);
- the data directory (path mode without a URL): the registry's ``_schemas`` topic replayed
  by ``seglog.schemas.read_registry``, re-read when an unknown id turns up.

In wire mode without ``schema.registry.url``, the broker's own registry is found through
DescribeConfigs of the broker: its config ``schema.registry.listen`` (``host:port``; a
wildcard host is replaced by the bootstrap server's host). One client per endpoint per
process (``_clients``): executors reuse it across tasks.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import Any

from confluent_kafka.admin import AdminClient, ConfigResource, ResourceType
from confluent_kafka.schema_registry import Schema, SchemaRegistryClient
from confluent_kafka.schema_registry.error import SchemaRegistryError

from seglog.schemas import AVRO, RegistryState, SchemaVersion, read_registry

__all__ = ["REGISTRY_BROKER_CONFIG", "RegistryRef", "discover_registry"]

REGISTRY_BROKER_CONFIG = "schema.registry.listen"
"""The broker config (``server.properties`` / ``--schema-registry-listen``) naming the
address its schema registry listens on; read through DescribeConfigs."""

_NOT_FOUND = (40401, 40402, 40403)  # Confluent: subject, version, schema not found


@dataclass(frozen=True)
class RegistryRef:
    """A schema registry endpoint (``url`` and client ``conf``) or a data directory."""

    url: str | None = None
    path: str | None = None
    conf: tuple[tuple[str, str], ...] = field(default=(), repr=False)  # may hold credentials

    def describe(self) -> str:
        """For error messages."""
        return f"schema registry {self.url}" if self.url else f"{self.path}/_schemas"

    def _client(self) -> SchemaRegistryClient:
        key = (self.url, self.conf)
        with _lock:
            client = _clients.get(key)
            if client is None:
                client = SchemaRegistryClient({"url": self.url, **dict(self.conf)})
                _clients[key] = client
            return client

    def _store(self, refresh: bool = False) -> RegistryState:
        assert self.path is not None
        with _lock:
            store = _stores.get(self.path)
            if store is None or refresh:
                store = read_registry(self.path)
                _stores[self.path] = store
            return store

    def subject_version(self, subject: str, version: int | None) -> SchemaVersion:
        """The subject's live ``version`` (None: latest). LookupError when absent."""
        if self.url is None:
            store = self._store(refresh=True)
            found = (
                store.latest(subject) if version is None else store.live_version(subject, version)
            )
            if found is None:
                raise LookupError(f"subject {subject!r} has no version {version or 'latest'}")
            return found
        try:
            got = self._client().get_version(subject, "latest" if version is None else version)
        except SchemaRegistryError as exc:
            if exc.error_code in _NOT_FOUND or exc.http_status_code == 404:
                raise LookupError(
                    f"subject {subject!r} has no version {version or 'latest'}: {exc}"
                ) from None
            raise
        return SchemaVersion(
            subject=subject,
            version=int(got.version),
            id=int(got.schema_id),
            schema=str(got.schema.schema_str),
            schema_type=str(got.schema.schema_type or AVRO),
        )

    def schema_text(self, schema_id: int) -> str | None:
        """The schema registered under ``schema_id``; None when no schema has that id."""
        if self.url is None:
            found = self._store().schema_of(schema_id)
            if found is None:
                found = self._store(refresh=True).schema_of(schema_id)
            return None if found is None else found.schema
        try:
            return str(self._client().get_schema(schema_id).schema_str)
        except SchemaRegistryError as exc:
            if exc.error_code in _NOT_FOUND or exc.http_status_code == 404:
                return None
            raise

    def register(self, subject: str, schema: str, schema_type: str = "AVRO") -> int:
        """Register (or find) ``schema`` under ``subject``; its global id. Needs a URL."""
        if self.url is None:
            raise ValueError(
                "registering a schema needs option schema.registry.url (a data directory's "
                "_schemas topic is only read)"
            )
        return int(self._client().register_schema(subject, Schema(schema, schema_type)))


_lock = threading.Lock()
_clients: dict[tuple[Any, ...], SchemaRegistryClient] = {}
_stores: dict[str, RegistryState] = {}


def discover_registry(kafka: dict[str, str]) -> str | None:
    """``http://host:port`` of the broker's own registry (its ``schema.registry.listen``
    config through DescribeConfigs), None when the broker serves none."""
    admin = AdminClient({k: v for k, v in kafka.items() if not k.startswith("group.")})
    brokers = admin.list_topics(timeout=10).brokers
    if not brokers:
        return None
    broker_id = str(min(brokers))
    resource = ConfigResource(ResourceType.BROKER, broker_id)
    configs = admin.describe_configs([resource])[resource].result(timeout=10)
    entry = configs.get(REGISTRY_BROKER_CONFIG)
    listen = entry.value if entry is not None else None
    if not listen:
        return None
    listen = str(listen).split(",")[0].strip()
    if "://" in listen:
        scheme, _, address = listen.partition("://")
    else:
        scheme, address = "http", listen
    host, _, port = address.rpartition(":")
    if host in ("", "0.0.0.0", "::", "[::]"):
        host = kafka["bootstrap.servers"].split(",")[0].rsplit(":", 1)[0]
    return f"{scheme}://{host}:{port}"
