"""Topic administration: CreateTopics (API 19), DeleteTopics (API 20) and CreatePartitions
(API 37).

controller_mutation_rate (KIP-599): each created, deleted or added partition is one
mutation of the client's quota. In the versions where Kafka is strict (CreateTopics v6+,
DeleteTopics v5+, CreatePartitions v3+) a topic met while the quota is already exceeded
fails with 89 THROTTLING_QUOTA_EXCEEDED and is not touched (the ones before it are done);
older versions are done whole. Either way the response carries the throttle in
``throttle_time_ms`` and the connection is muted for it.
"""

from __future__ import annotations

from typing import Any

from kafka.protocol.admin import (
    CreatePartitionsResponse,
    CreateTopicsResponse,
    DeleteTopicsResponse,
)

from seglog.broker.config.settings import validate_remote_storage, validate_topic_configs
from seglog.broker.context import BrokerContext, RequestContext
from seglog.broker.log.internal_topics import INTERNAL_TOPICS
from seglog.broker.protocol import errors as _errors
from seglog.broker.security.authorizer import CLUSTER_NAME, Op, Res
from seglog.errors import InvalidTopicError, SeglogError, TopicExistsError, UnknownTopicError
from seglog.storage import MAX_PARTITIONS, validate_topic_name

__all__ = [
    "handle_create_partitions",
    "handle_create_topics",
    "handle_delete_topics",
]


class _Mutations:
    """A request's partition mutations against its client's controller_mutation_rate."""

    def __init__(self, ctx: BrokerContext, rctx: RequestContext, strict_from: int) -> None:
        self._quotas = ctx.quotas
        self._rctx = rctx
        self._strict = rctx.api_version >= strict_from
        self.throttle_ms = 0

    def refused(self) -> bool:
        """Strict versions: whether the quota is already exceeded (the topic gets 89)."""
        if self._quotas is None or not self._strict:
            return False
        throttle = self._quotas.mutation_exceeded(self._rctx.user, self._rctx.client_id)
        self.throttle_ms = max(self.throttle_ms, throttle)
        return throttle > 0

    def record(self, partitions: int) -> None:
        """Count ``partitions`` mutations done."""
        if self._quotas is not None:
            throttle = self._quotas.record_mutations(
                self._rctx.user, self._rctx.client_id, partitions
            )
            self.throttle_ms = max(self.throttle_ms, throttle)

    def finish(self) -> int:
        """Mute the connection for the throttle; returns it (``throttle_time_ms``)."""
        self._rctx.mute(self.throttle_ms)
        return self.throttle_ms


_THROTTLED = "The throttling quota has been exceeded."
_CTResult = CreateTopicsResponse.CreatableTopicResult
_CTConfig = _CTResult.CreatableTopicConfigs
_DYNAMIC_TOPIC_CONFIG = 1


def _assignment_problem(assignments: Any, node_id: int) -> str | None:
    """Why a manual assignment cannot be placed on this single broker, or None (Kafka's
    ReplicationControlManager.createTopic: each partition once, a replica list naming
    registered brokers once each, partitions 0..n-1)."""
    seen: set[int] = set()
    for a in assignments:
        if a.partition_index in seen:
            return f"Found multiple manual partition assignments for partition {a.partition_index}"
        seen.add(a.partition_index)
        if list(a.broker_ids) != [node_id]:
            return f"partition {a.partition_index}: the replicas must be [{node_id}], this broker"
    if seen != set(range(len(assignments))):
        return "partitions should be a consecutive 0-based integer sequence"
    return None


def _create_one(
    ctx: BrokerContext, rctx: RequestContext, t: Any, validate_only: bool, version: int
) -> Any:
    name = t.name
    partitions = t.num_partitions
    kwargs: dict[str, Any] = {"name": name, "error_message": None}
    if not (
        rctx.allowed(Op.CREATE, Res.CLUSTER, CLUSTER_NAME)
        or rctx.allowed(Op.CREATE, Res.TOPIC, name)
    ):
        return _CTResult(error_code=_errors.TOPIC_AUTHORIZATION_FAILED, **kwargs)
    try:
        validate_topic_name(name)
        if ctx.topics.get(name) is not None:
            raise TopicExistsError(f"topic {name!r} already exists")
        if t.assignments:
            if partitions != -1 or t.replication_factor != -1:
                return _CTResult(error_code=_errors.INVALID_REQUEST, **kwargs)
            problem = _assignment_problem(t.assignments, ctx.config.node_id)
            if problem is not None:
                kwargs["error_message"] = problem
                return _CTResult(error_code=_errors.INVALID_REPLICA_ASSIGNMENT, **kwargs)
            partitions = len(t.assignments)
        elif partitions == -1:
            partitions = ctx.topics.num_partitions
        if not 1 <= partitions <= MAX_PARTITIONS:
            kwargs["error_message"] = f"Number of partitions must be in [1, {MAX_PARTITIONS}]"
            return _CTResult(error_code=_errors.INVALID_PARTITIONS, **kwargs)
        if t.replication_factor not in (-1, 1):
            return _CTResult(error_code=_errors.INVALID_REPLICATION_FACTOR, **kwargs)
        configs = {c.name: c.value for c in t.configs if c.value is not None}
        validate_topic_configs(configs)
        validate_remote_storage(
            configs,
            store=ctx.config.remote_storage_url is not None,
            default_cleanup_policy=ctx.config.log_cleanup_policy,
        )
        if validate_only:
            return _CTResult(
                error_code=0, num_partitions=partitions, replication_factor=1, configs=[], **kwargs
            )
        info = ctx.topics.create(name, partitions, configs)
    except (SeglogError, ValueError, OSError) as exc:
        kwargs["error_message"] = str(exc)
        return _CTResult(error_code=_errors.error_code(exc), **kwargs)
    return _CTResult(
        topic_id=info.topic_id,
        error_code=0,
        num_partitions=info.partitions,
        replication_factor=1,
        configs=[
            _CTConfig(
                name=k,
                value=v,
                read_only=False,
                config_source=_DYNAMIC_TOPIC_CONFIG,
                is_sensitive=False,
            )
            for k, v in sorted(info.configs.items())
        ],
        **kwargs,
    )


def handle_create_topics(ctx: BrokerContext, rctx: RequestContext, req: Any) -> Any:
    """Create topics. Per topic: 17 illegal name (nothing touched on disk), 36 exists,
    37 partitions < 1 or > MAX_PARTITIONS, 38 replication factor other than 1, 39 a manual
    assignment other than one replica on this broker per partition 0..n-1, 40 bad config,
    42 a name given twice in one request or an assignment next to a partition count or
    replication factor. ``validate_only`` checks without creating."""
    version = rctx.api_version
    names = [t.name for t in req.topics]
    mutations = _Mutations(ctx, rctx, strict_from=6)
    results = []
    for t in req.topics:
        if names.count(t.name) > 1:
            results.append(_CTResult(name=t.name, error_code=_errors.INVALID_REQUEST))
        elif not req.validate_only and mutations.refused():
            results.append(
                _CTResult(
                    name=t.name,
                    error_code=_errors.THROTTLING_QUOTA_EXCEEDED,
                    error_message=_THROTTLED,
                )
            )
        else:
            result = _create_one(ctx, rctx, t, req.validate_only, version)
            if result.error_code == 0 and not req.validate_only:
                mutations.record(result.num_partitions)
            results.append(result)
    return CreateTopicsResponse[version](throttle_time_ms=mutations.finish(), topics=results)


_DTResult = DeleteTopicsResponse.DeletableTopicResult


def handle_delete_topics(ctx: BrokerContext, rctx: RequestContext, req: Any) -> Any:
    """Delete topics by name (v6+: or topic id). 3 unknown topic, 17 illegal name,
    100 unknown topic id."""
    version = rctx.api_version
    wanted: list[tuple[str | None, Any]] = (
        [(t.name, t.topic_id) for t in req.topics]
        if version >= 6
        else [(n, None) for n in req.topic_names]
    )
    mutations = _Mutations(ctx, rctx, strict_from=5)
    results = []
    for wanted_name, wanted_id in wanted:
        name, topic_id = wanted_name, wanted_id
        if mutations.refused():
            kw: dict[str, Any] = {"name": name, "error_code": _errors.THROTTLING_QUOTA_EXCEEDED}
            if version >= 5:
                kw["error_message"] = _THROTTLED
            if topic_id is not None:
                kw["topic_id"] = topic_id
            results.append(_DTResult(**kw))
            continue
        if name is None and topic_id is not None:
            info = ctx.topics.by_id(topic_id)
            if info is None:
                results.append(
                    _DTResult(name=None, topic_id=topic_id, error_code=_errors.UNKNOWN_TOPIC_ID)
                )
                continue
            name = info.name
        try:
            if name is None:
                raise UnknownTopicError("no topic name or id")
            if not rctx.allowed(Op.DELETE, Res.TOPIC, name):
                denied = name
                if wanted_name is None and not rctx.allowed(Op.DESCRIBE, Res.TOPIC, name):
                    name = None  # Kafka: asked by id, the name is told only to who may describe
                raise _errors.TopicAuthorizationError(denied)
            if name in INTERNAL_TOPICS:
                raise InvalidTopicError(f"{name} is internal: it holds group state")
            info = ctx.topics.get(name)
            ctx.topics.delete(name)
            mutations.record(info.partitions if info is not None else 1)
            ctx.metrics.forget_topic(name)
            ctx.producers.forget_topic(name)
            ctx.committed.forget_topic(name)
            code = 0
            topic_id = info.topic_id if info is not None else topic_id
        except SeglogError as exc:
            code = _errors.error_code(exc)
        kwargs: dict[str, Any] = {"name": name, "error_code": code, "error_message": None}
        if topic_id is not None:
            kwargs["topic_id"] = topic_id
        results.append(_DTResult(**kwargs))
    return DeleteTopicsResponse[version](throttle_time_ms=mutations.finish(), responses=results)


_CPResult = CreatePartitionsResponse.CreatePartitionsTopicResult


def _grow_one(
    ctx: BrokerContext, rctx: RequestContext, t: Any, validate_only: bool, mutations: _Mutations
) -> Any:
    node_id = ctx.config.node_id
    if not rctx.allowed(Op.ALTER, Res.TOPIC, t.name):
        return _CPResult(
            name=t.name, error_code=_errors.TOPIC_AUTHORIZATION_FAILED, error_message=None
        )
    try:
        validate_topic_name(t.name)
        info = ctx.topics.get(t.name)
        if info is None:
            raise UnknownTopicError(f"unknown topic {t.name!r}")
        if t.count <= info.partitions:
            return _CPResult(
                name=t.name,
                error_code=_errors.INVALID_PARTITIONS,
                error_message=f"Topic currently has {info.partitions} partitions, which is "
                f"higher than or equal to the requested {t.count}.",
            )
        if t.count > MAX_PARTITIONS:
            return _CPResult(
                name=t.name,
                error_code=_errors.INVALID_PARTITIONS,
                error_message=f"A topic holds at most {MAX_PARTITIONS} partitions here.",
            )
        if t.assignments is not None and (
            len(t.assignments) != t.count - info.partitions
            or any(list(a.broker_ids) != [node_id] for a in t.assignments)
        ):
            return _CPResult(
                name=t.name,
                error_code=_errors.INVALID_REPLICA_ASSIGNMENT,
                error_message=f"one assignment [{node_id}] per new partition on this broker",
            )
        if not validate_only:
            if mutations.refused():
                return _CPResult(
                    name=t.name,
                    error_code=_errors.THROTTLING_QUOTA_EXCEEDED,
                    error_message=_THROTTLED,
                )
            ctx.topics.add_partitions(t.name, t.count)
            mutations.record(t.count - info.partitions)
    except (SeglogError, ValueError, OSError) as exc:
        return _CPResult(name=t.name, error_code=_errors.error_code(exc), error_message=str(exc))
    return _CPResult(name=t.name, error_code=0, error_message=None)


def handle_create_partitions(ctx: BrokerContext, rctx: RequestContext, req: Any) -> Any:
    """Add partitions to topics (Kafka's CreatePartitions; partitions only grow). Per
    topic: 3 unknown topic, 17 illegal name, 37 count not above the current one or above
    MAX_PARTITIONS, 39 assignments other than this broker, 42 a topic named twice;
    ``validate_only`` checks without changing anything."""
    version = rctx.api_version
    names = [t.name for t in req.topics]
    mutations = _Mutations(ctx, rctx, strict_from=3)
    results = [
        _CPResult(name=t.name, error_code=_errors.INVALID_REQUEST, error_message="duplicate topic")
        if names.count(t.name) > 1
        else _grow_one(ctx, rctx, t, req.validate_only, mutations)
        for t in req.topics
    ]
    return CreatePartitionsResponse[version](throttle_time_ms=mutations.finish(), results=results)
