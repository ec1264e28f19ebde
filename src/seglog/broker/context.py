"""What every API handler sees: the broker's shared services (:class:`BrokerContext`, one
per broker, owned by the event loop) and the facts of the request it handles
(:class:`RequestContext`, one per request, never shared).

Every handler has one signature, ``handler(ctx, rctx, request)`` (see
``seglog.broker.apis.registry``), so a permission check reads the principal the request
arrived with, before or after an ``await``."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

from seglog.broker.config.broker_config import BrokerConfig
from seglog.broker.config.listeners import Listener
from seglog.broker.coordinator.classic_members import ClassicMemberCoordinator
from seglog.broker.coordinator.committed import CommittedOffsets
from seglog.broker.coordinator.groups import GroupCoordinator
from seglog.broker.coordinator.share_groups import ShareGroupCoordinator
from seglog.broker.coordinator.share_sessions import ShareSessionCache
from seglog.broker.coordinator.transactions import TransactionCoordinator
from seglog.broker.log.cluster_state import BrokerState
from seglog.broker.log.durability import DurabilityWaiters
from seglog.broker.log.producers import ProducerStateTable
from seglog.broker.log.topics import TopicManager
from seglog.broker.metrics import BrokerMetrics
from seglog.broker.protocol.framing import RequestHeader
from seglog.broker.security.authorizer import Authorizer
from seglog.broker.security.scram_store import CredentialStore
from seglog.broker.security.session import Session
from seglog.broker.security.throttling import QuotaManager
from seglog.schemas import Registry

__all__ = ["BrokerContext", "RequestContext"]


@dataclasses.dataclass
class BrokerContext:
    """The broker's shared services. ``sync_before_ack`` is the default durability policy
    (answer acks=1/all produces only after their bytes are fsynced); ``durability`` holds
    the produces waiting for their fsync."""

    config: BrokerConfig
    topics: TopicManager
    state: BrokerState
    producers: ProducerStateTable
    committed: CommittedOffsets
    sync_before_ack: bool
    durability: DurabilityWaiters
    consumer_groups: ClassicMemberCoordinator
    """KIP-848 consumer groups (ConsumerGroupHeartbeat, and their classic-protocol members),
    persisted in ``committed``'s log."""
    share_groups: ShareGroupCoordinator
    """KIP-932 share groups: membership, assignment, share partitions."""
    transactions: TransactionCoordinator
    """The transaction coordinator (KIP-98), persisted in ``__transaction_state``."""
    listeners: tuple[Listener, ...] = ()
    """The running listeners: bound port, and the address clients are given in
    ``advertised_host``/``advertised_port`` (DescribeConfigs)."""
    shutting_down: bool = False
    groups: GroupCoordinator = dataclasses.field(default_factory=GroupCoordinator)
    """Classic group membership (JoinGroup/SyncGroup/Heartbeat/LeaveGroup)."""
    share_sessions: ShareSessionCache = dataclasses.field(
        default_factory=lambda: ShareSessionCache(2000)
    )
    """Share sessions (ShareFetch / ShareAcknowledge epochs), by group and member."""
    metrics: BrokerMetrics = dataclasses.field(default_factory=BrokerMetrics)
    """Traffic counters and latency histograms (exported by ``--metrics-listen``)."""
    credentials: CredentialStore | None = None
    """SCRAM credentials (SASL listeners), None without SASL."""
    sasl_mechanisms: tuple[str, ...] = ()
    """sasl.enabled.mechanisms."""
    authorizer: Authorizer | None = None
    """ACLs (None: everything allowed)."""
    quotas: QuotaManager | None = None
    """Client quotas: their configs (``quotas.store``) and sensors (None: none enforced)."""
    schemas: Registry | None = None
    """The schema registry over ``_schemas`` (None: never enabled on this data directory)."""
    schema_registry_url: str | None = None
    """``http(s)://host:port`` of the registry's REST API once it listens (None: not
    served); the BROKER resource's ``schema.registry.listen`` in DescribeConfigs."""
    schema_validation: dict[str, tuple[bool, bool]] = dataclasses.field(default_factory=dict)
    """Topics validating schema ids on produce: (keys, values)
    (``log.schema_validation.validation_map``, rebuilt when topics change)."""


@dataclasses.dataclass(slots=True)
class RequestContext:
    """One request's facts, fixed when it arrives: its header, the principal and client
    host it came with (ACLs), the listener it arrived on and that listener's advertised
    address (Metadata, FindCoordinator, DescribeCluster answer with it), and the
    connection's :class:`Session` (the SASL APIs move it on)."""

    header: RequestHeader
    principal: str
    """``User:NAME`` (or Kafka's ``User:ANONYMOUS``) when the request arrived."""
    client_host: str
    """The client's IP address ("" when unknown)."""
    listener: str
    """The name of the listener it arrived on."""
    host: str
    """The advertised host of that listener."""
    port: int
    """The advertised port of that listener."""
    session: Session
    """The connection's authentication state (shared by its requests)."""
    sasl_listener: bool = False
    """Whether the listener authenticates with SASL."""
    peer: Any = None
    """The client's socket address (log lines)."""
    close_connection: Callable[[], None] = lambda: None
    """Close the connection once the responses already queued are written."""
    on_connection_close: Callable[[Callable[[], None]], None] = lambda _hook: None
    """Register a callable to run (on the event loop) once the connection is gone."""
    mute: Callable[[int], None] = lambda _ms: None
    """Stop reading from the connection for that many ms (a quota throttle, KIP-219:
    responses already due are still written)."""
    authorizer: Authorizer | None = None

    @property
    def api_version(self) -> int:
        """The request's version (the header's ``api_version``)."""
        return self.header.api_version

    @property
    def user(self) -> str:
        """The user of client quotas: the principal's name (``User:alice`` → ``alice``)."""
        return self.principal.partition(":")[2] or self.principal

    @property
    def client_id(self) -> str:
        """The header's client id ("" when null)."""
        return self.header.client_id or ""

    def allowed(self, operation: int, resource_type: int, name: str) -> bool:
        """Whether this request's principal may do ``operation`` on the resource
        (:class:`Authorizer`; always True without one)."""
        if self.authorizer is None:
            return True
        return self.authorizer.authorize(
            self.principal, self.client_host, operation, resource_type, name
        )
