"""Metadata (API 3) and FindCoordinator (API 10): this single broker leads every
partition and coordinates every group and transactional id."""

from __future__ import annotations

from typing import Any

from kafka.protocol.metadata import FindCoordinatorResponse, MetadataResponse

from seglog.broker.context import BrokerContext, RequestContext
from seglog.broker.log.internal_topics import INTERNAL_TOPICS
from seglog.broker.protocol import errors as _errors
from seglog.broker.security.authorizer import CLUSTER_NAME, Op, Res
from seglog.errors import SeglogError
from seglog.storage import TopicInfo

__all__ = ["handle_find_coordinator", "handle_metadata"]

_Topic = MetadataResponse.MetadataResponseTopic
_Partition = _Topic.MetadataResponsePartition


def _topic_entry(ctx: BrokerContext, info: TopicInfo) -> Any:
    node = ctx.config.node_id
    partitions = [
        _Partition(
            error_code=0,
            partition_index=p,
            leader_id=node,
            leader_epoch=0,
            replica_nodes=[node],
            isr_nodes=[node],
            offline_replicas=[],
        )
        for p in range(info.partitions)
    ]
    return _Topic(
        error_code=0,
        name=info.name,
        topic_id=info.topic_id,
        is_internal=info.name in INTERNAL_TOPICS,  # as Kafka marks its internal topics
        partitions=partitions,
    )


def _error_entry(name: str | None, code: int, topic_id: Any = None) -> Any:
    kwargs: dict[str, Any] = {"error_code": code, "name": name, "is_internal": False}
    kwargs["partitions"] = []
    if topic_id is not None:
        kwargs["topic_id"] = topic_id
    return _Topic(**kwargs)


def handle_metadata(ctx: BrokerContext, rctx: RequestContext, req: Any) -> Any:
    """Brokers (this one), cluster id, and the requested topics (all when ``topics`` is
    null, or empty at v0). A missing topic is auto-created when both the broker and the
    request allow it; else 3 UNKNOWN_TOPIC_OR_PARTITION; an illegal name is 17
    INVALID_TOPIC_EXCEPTION and touches nothing on disk."""
    version = rctx.api_version
    requested = req.topics
    if version == 0 and not requested:
        requested = None
    allow = req.allow_auto_topic_creation if version >= 4 else True
    topics = []
    if requested is None:  # every topic the principal may describe (the others are hidden)
        topics = [
            _topic_entry(ctx, info)
            for info in ctx.topics.all().values()
            if rctx.allowed(Op.DESCRIBE, Res.TOPIC, info.name)
        ]
    else:
        for t in requested:
            name = t.name
            if name is None:  # v10+: by topic id
                info = ctx.topics.by_id(t.topic_id)
                if info is None:
                    topics.append(_error_entry(None, _errors.UNKNOWN_TOPIC_ID, t.topic_id))
                elif not rctx.allowed(Op.DESCRIBE, Res.TOPIC, info.name):
                    # Kafka: 29 with the id (not secret) and without the name (secret)
                    topics.append(
                        _error_entry(None, _errors.TOPIC_AUTHORIZATION_FAILED, t.topic_id)
                    )
                else:
                    topics.append(_topic_entry(ctx, info))
                continue
            if not rctx.allowed(Op.DESCRIBE, Res.TOPIC, name):
                topics.append(_error_entry(name, _errors.TOPIC_AUTHORIZATION_FAILED))
                continue
            creatable = rctx.allowed(Op.CREATE, Res.CLUSTER, CLUSTER_NAME) or rctx.allowed(
                Op.CREATE, Res.TOPIC, name
            )
            try:
                info = ctx.topics.ensure(name, allow_auto_create=allow and creatable)
            except (SeglogError, OSError) as exc:
                topics.append(_error_entry(name, _errors.error_code(exc)))
            else:
                topics.append(_topic_entry(ctx, info))
    broker = MetadataResponse.MetadataResponseBroker(
        node_id=ctx.config.node_id, host=rctx.host, port=rctx.port, rack=None
    )
    return MetadataResponse[version](
        throttle_time_ms=0,
        brokers=[broker],
        cluster_id=ctx.state.cluster_id,
        controller_id=ctx.config.node_id,
        topics=topics,
        error_code=0,
    )


_KEY_TYPES = {0: Res.GROUP, 1: Res.TRANSACTIONAL_ID}  # FindCoordinator key types (KIP-98)


def _coordinator_code(rctx: RequestContext, key_type: int, key: str) -> int:
    """0; 42 INVALID_REQUEST for an unknown key type (2, SHARE, is served only through the
    share APIs here); 53 without DESCRIBE on a transactional id (Kafka's check). Group keys
    are not checked here: the group APIs answer 30 GROUP_AUTHORIZATION_FAILED themselves."""
    resource = _KEY_TYPES.get(key_type)
    if resource is None:
        return _errors.INVALID_REQUEST
    if resource == Res.TRANSACTIONAL_ID and not rctx.allowed(Op.DESCRIBE, resource, key):
        return _errors.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
    return _errors.NONE


def handle_find_coordinator(ctx: BrokerContext, rctx: RequestContext, req: Any) -> Any:
    """This broker for every group (key type 0) and transactional id (key type 1); v4+
    answers per key. Errors: :func:`_coordinator_code` (node -1 with them)."""
    version = rctx.api_version
    node, host, port = ctx.config.node_id, rctx.host, rctx.port
    resp = FindCoordinatorResponse[version]
    key_type = req.key_type if version >= 1 else 0
    if version >= 4:
        coordinators = []
        for key in req.coordinator_keys:
            code = _coordinator_code(rctx, key_type, key)
            ok = code == _errors.NONE
            coordinators.append(
                FindCoordinatorResponse.Coordinator(
                    key=key, node_id=node if ok else -1, host=host if ok else "",
                    port=port if ok else -1, error_code=code, error_message=None,
                )
            )  # fmt: skip
        return resp(throttle_time_ms=0, coordinators=coordinators)
    code = _coordinator_code(rctx, key_type, req.key)
    if code != _errors.NONE:
        return resp(
            throttle_time_ms=0, error_code=code, error_message=None, node_id=-1, host="", port=-1
        )
    return resp(
        throttle_time_ms=0, error_code=0, error_message=None, node_id=node, host=host, port=port
    )
