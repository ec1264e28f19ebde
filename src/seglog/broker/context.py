"""What every API handler sees: the broker's shared state, owned by the event loop."""

from __future__ import annotations

import dataclasses

from seglog.broker.config.broker_config import BrokerConfig
from seglog.broker.coordinator.committed import CommittedOffsets
from seglog.broker.coordinator.groups import GroupCoordinator
from seglog.broker.log.durability import DurabilityWaiters
from seglog.broker.log.producers import BrokerState, ProducerStateTable
from seglog.broker.log.topics import TopicManager
from seglog.broker.metrics import BrokerMetrics
from seglog.broker.security.authorizer import Authorizer
from seglog.broker.security.scram_store import CredentialStore

__all__ = ["BrokerContext"]


@dataclasses.dataclass
class BrokerContext:
    """Shared broker state. ``host``/``port`` are the advertised listener (Metadata,
    FindCoordinator); ``sync_before_ack`` is the default durability policy (answer
    acks=1/all produces only after their bytes are fsynced); ``durability`` holds the
    produces waiting for their fsync."""

    config: BrokerConfig
    topics: TopicManager
    state: BrokerState
    producers: ProducerStateTable
    committed: CommittedOffsets
    host: str
    port: int
    sync_before_ack: bool
    durability: DurabilityWaiters
    shutting_down: bool = False
    groups: GroupCoordinator = dataclasses.field(default_factory=GroupCoordinator)
    """Consumer-group membership (JoinGroup/SyncGroup/Heartbeat/LeaveGroup)."""
    metrics: BrokerMetrics = dataclasses.field(default_factory=BrokerMetrics)
    credentials: CredentialStore | None = None
    """SCRAM credentials (SASL listeners), None without SASL."""
    sasl_mechanisms: tuple[str, ...] = ()
    """sasl.enabled.mechanisms."""
    authorizer: Authorizer | None = None
    """ACLs (None: everything allowed)."""
    principal: str = "User:ANONYMOUS"
    """The principal of the request being handled (set by the dispatcher per request)."""
    client_host: str = ""
    """Its client's address (ACL hosts)."""
    listener: str = "PLAINTEXT"
    """The name of the listener it arrived on (``host``/``port`` are its address)."""

    def allowed(self, operation: int, resource_type: int, name: str) -> bool:
        """Whether the current request's principal may do ``operation`` on the resource
        (:class:`Authorizer`; always True without one). Call it in the synchronous part of
        a handler: the principal changes with the next request."""
        if self.authorizer is None:
            return True
        return self.authorizer.authorize(
            self.principal, self.client_host, operation, resource_type, name
        )

    """Traffic counters and latency histograms (exported by ``--metrics-listen``)."""
