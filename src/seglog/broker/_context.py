"""What every API handler sees: the broker's shared state, owned by the event loop."""

from __future__ import annotations

import dataclasses

from seglog.broker._committed import CommittedOffsets
from seglog.broker._config import BrokerConfig
from seglog.broker._durability import DurabilityWaiters
from seglog.broker._groups import GroupCoordinator
from seglog.broker._metrics import BrokerMetrics
from seglog.broker._producers import BrokerState, ProducerStateTable
from seglog.broker._scram_store import CredentialStore
from seglog.broker._topics import TopicManager

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
    """Traffic counters and latency histograms (exported by ``--metrics-listen``)."""
