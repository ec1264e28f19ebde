"""seglog's single-node Kafka-wire broker (``seglog serve``): asyncio, kafka-python's
protocol schemas, one partition = one ``seglog.storage.Log``.

APIs served (advertised versions in ``_protocol.APIS``): ApiVersions, Metadata, Produce,
Fetch, ListOffsets, CreateTopics, DeleteTopics, InitProducerId, FindCoordinator,
OffsetCommit, OffsetFetch, and consumer-group membership (JoinGroup, SyncGroup,
Heartbeat, LeaveGroup, DescribeGroups, ListGroups: ``_groups``, ``_group_apis``).
"""

from __future__ import annotations

from seglog.broker.config.broker_config import BrokerConfig, parse_host_port
from seglog.broker.config.listeners import Listener, parse_listeners
from seglog.broker.coordinator.committed import OFFSETS_TOPIC
from seglog.broker.network.server import Broker, run_broker
from seglog.broker.security.scram_store import CredentialStore
from seglog.broker.testing import BrokerProcess, start_broker

__all__ = [
    "OFFSETS_TOPIC",
    # running a broker in this process
    "Broker",
    "BrokerConfig",
    # a `seglog serve` subprocess (tests, demo, benchmarks)
    "BrokerProcess",
    # listeners and security
    "CredentialStore",
    "Listener",
    "parse_host_port",
    "parse_listeners",
    "run_broker",
    "start_broker",
]
