"""seglog's single-node Kafka-wire broker (``seglog serve``): asyncio, kafka-python's
protocol schemas, one partition = one ``seglog.storage.Log``.

The APIs served and their versions are one table, ``seglog.broker.apis.registry``. Inside,
subpackages import one way, bottom first (``tests/test_quality.py`` holds the order):
``protocol`` (framing, API keys, errors, the blocking client) and ``config``; ``security``
(authorizer, TLS, SCRAM store, the connection's SASL session) and ``log`` (topic manager,
durability, retention, producer state, internal topic names); ``coordinator`` (consumer
groups, committed offsets, share groups); ``metrics``; ``context`` (the broker's services and each
request's facts); ``apis`` (one module per API family, the registry); ``network``
(connections, listeners, dispatch); ``process`` (``seglog serve``'s event loop) and
``testing`` (a ``seglog serve`` subprocess).

Other packages use only the names below. They load on first use, so importing one of them
(a settings table, ``split_host_port``) does not load the whole broker. Among them, the
blocking Kafka wire client (``protocol.client``: ``KafkaConnection`` with TLS and SASL,
``ClientSecurity``) that Spark's raw reader and sink share with the broker's framing, and
over it the share-group administration the CLI and the console use
(``protocol.share_admin``: ``list_share_groups``, ``describe_share_group``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from seglog._lazy import load_export

if TYPE_CHECKING:
    from seglog.broker.config.broker_config import BrokerConfig
    from seglog.broker.config.listeners import Listener, parse_listeners
    from seglog.broker.config.settings import (
        BOOLEAN,
        BROKER_SETTINGS,
        BROKER_SETTINGS_BY_NAME,
        BrokerSetting,
    )
    from seglog.broker.log.internal_topics import OFFSETS_TOPIC
    from seglog.broker.network.server import Broker
    from seglog.broker.process import run_broker
    from seglog.broker.protocol.address import split_host_port
    from seglog.broker.protocol.client import (
        CLIENT_OPTIONS,
        ClientSecurity,
        KafkaConnection,
        client_supports,
    )
    from seglog.broker.protocol.share_admin import (
        ShareAdminError,
        ShareGroupInfo,
        describe_share_group,
        list_share_groups,
        wire_security,
    )
    from seglog.broker.security.scram_store import CredentialStore
    from seglog.broker.testing import BrokerProcess, free_port, start_broker

__all__ = [
    "BOOLEAN",
    "BROKER_SETTINGS",
    "BROKER_SETTINGS_BY_NAME",
    # a blocking Kafka wire client (Spark's raw reader and sink)
    "CLIENT_OPTIONS",
    "OFFSETS_TOPIC",
    # running a broker in this process
    "Broker",
    "BrokerConfig",
    # a `seglog serve` subprocess (tests, demo, benchmarks)
    "BrokerProcess",
    # the broker settings table (flags, server.properties keys, defaults)
    "BrokerSetting",
    "ClientSecurity",
    # listeners and security
    "CredentialStore",
    "KafkaConnection",
    "Listener",
    # share-group administration over the wire client (confluent-kafka has none)
    "ShareAdminError",
    "ShareGroupInfo",
    "client_supports",
    "describe_share_group",
    "free_port",
    "list_share_groups",
    "parse_listeners",
    "run_broker",
    "split_host_port",
    "start_broker",
    "wire_security",
]

_WHERE = {
    "BOOLEAN": "config.settings",
    "BROKER_SETTINGS": "config.settings",
    "BROKER_SETTINGS_BY_NAME": "config.settings",
    "Broker": "network.server",
    "BrokerConfig": "config.broker_config",
    "BrokerProcess": "testing",
    "BrokerSetting": "config.settings",
    "CLIENT_OPTIONS": "protocol.client",
    "ClientSecurity": "protocol.client",
    "CredentialStore": "security.scram_store",
    "KafkaConnection": "protocol.client",
    "Listener": "config.listeners",
    "ShareAdminError": "protocol.share_admin",
    "ShareGroupInfo": "protocol.share_admin",
    "OFFSETS_TOPIC": "log.internal_topics",
    "client_supports": "protocol.client",
    "describe_share_group": "protocol.share_admin",
    "free_port": "testing",
    "list_share_groups": "protocol.share_admin",
    "parse_listeners": "config.listeners",
    "run_broker": "process",
    "split_host_port": "protocol.address",
    "start_broker": "testing",
    "wire_security": "protocol.share_admin",
}


def __getattr__(name: str) -> Any:
    """Load a public name from its module on first use (PEP 562)."""
    return load_export(__name__, _WHERE, name)
