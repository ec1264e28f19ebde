"""DescribeConfigs (API 32), AlterConfigs (API 33) and IncrementalAlterConfigs (API 44)
for TOPIC (resource type 2) and BROKER (4) resources, over the table in
``config.settings``; GROUP (32) resources (share-group configs: ``group_configs``);
ListConfigResources (API 74) names those resources.

Topic configs are per-topic overrides persisted in the topic metadata and applied live;
broker configs are static (``seglog serve`` flags and properties, the table
``BROKER_SETTINGS``, plus Kafka's static identity and listener configs: log.dirs,
process.roles, broker.id, listeners, advertised.listeners,
listener.security.protocol.map): describing them works, altering them
answers 42 INVALID_REQUEST with a message saying so. Kafka's rules: a config name not in
the table or a bad value is 40 INVALID_CONFIG, an unknown topic 3, a broker resource
naming another node 42, an unknown resource type 42; ``validate_only`` checks and changes
nothing; each resource succeeds or fails as a whole.

ListConfigResources (v0-1, KIP-1142; v0 was KIP-714's ListClientMetricsResources) answers
as Kafka 4.1+'s ``KafkaApis.handleListConfigResources``: 31 CLUSTER_AUTHORIZATION_FAILED
without DESCRIBE_CONFIGS on the cluster; v0 lists client-metrics subscriptions only; v1
lists the types asked for (none: every supported type), and a type outside TOPIC 2,
BROKER 4, BROKER_LOGGER 8, CLIENT_METRICS 16, GROUP 32 fails the whole request with 35
UNSUPPORTED_VERSION. Rows come in Kafka's type order (GROUP, CLIENT_METRICS,
BROKER_LOGGER, BROKER, TOPIC): the groups with configs set (share groups'
``share.auto.offset.reset``), this broker (its node id) and every topic,
``__consumer_offsets`` included, by name; seglog has no client-metrics subscriptions and
no broker-logger configs.
"""

from __future__ import annotations

from typing import Any

from kafka.protocol.admin import (
    AlterConfigsResponse,
    DescribeConfigsResponse,
    IncrementalAlterConfigsResponse,
    ListConfigResourcesResponse,
)

from seglog.broker.apis.group_configs import GROUP, alter_group_configs, describe_group_configs
from seglog.broker.config.listeners import listener_entries
from seglog.broker.config.settings import (
    DEFAULT_CONFIG,
    DYNAMIC_TOPIC_CONFIG,
    REMOTE_STORAGE_ENABLE,
    STATIC_BROKER_CONFIG,
    TOPIC_CONFIGS,
    broker_entries,
    schema_registry_entries,
    validate_remote_storage,
    validate_topic_configs,
)
from seglog.broker.context import BrokerContext, RequestContext
from seglog.broker.protocol import errors as _errors
from seglog.broker.security.authorizer import CLUSTER_NAME, Op, Res
from seglog.errors import SeglogError, UnknownTopicError
from seglog.storage import LogConfig, validate_topic_name

__all__ = [
    "handle_alter_configs",
    "handle_describe_configs",
    "handle_incremental_alter_configs",
    "handle_list_config_resources",
]

TOPIC, BROKER = 2, 4
BROKER_LOGGER, CLIENT_METRICS = 8, 16  # ConfigResource.Type ids (GROUP 32: group_configs)
LISTABLE = (GROUP, CLIENT_METRICS, BROKER_LOGGER, BROKER, TOPIC)  # Kafka's listing order
SET, DELETE, APPEND, SUBTRACT = 0, 1, 2, 3

_Result = DescribeConfigsResponse.DescribeConfigsResult
_Entry = _Result.DescribeConfigsResourceResult
_Synonym = _Entry.DescribeConfigsSynonym
_AlterResult = AlterConfigsResponse.AlterConfigsResourceResponse
_IncResult = IncrementalAlterConfigsResponse.AlterConfigsResourceResponse


class _RequestError(Exception):
    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code = code


def _authorize(ctx: BrokerContext, rctx: RequestContext, r: Any, operation: int) -> None:
    """29 (topic) / 31 (broker) unless the principal may ``operation`` the resource."""
    if r.resource_type == TOPIC and not rctx.allowed(operation, Res.TOPIC, r.resource_name):
        raise _RequestError(_errors.TOPIC_AUTHORIZATION_FAILED, "not authorized")
    if r.resource_type == BROKER and not rctx.allowed(operation, Res.CLUSTER, CLUSTER_NAME):
        raise _RequestError(_errors.CLUSTER_AUTHORIZATION_FAILED, "not authorized")


def _check_broker(ctx: BrokerContext, name: str) -> None:
    if name not in ("", str(ctx.config.node_id)):
        raise _RequestError(_errors.INVALID_REQUEST, f"this broker is node {ctx.config.node_id}")


def _topic_entries(
    ctx: BrokerContext, name: str, keys: set[str] | None, synonyms: bool, docs: bool
) -> list[Any]:
    validate_topic_name(name)
    info = ctx.topics.get(name)
    if info is None:
        raise UnknownTopicError(f"unknown topic {name!r}")
    out = []
    for spec in TOPIC_CONFIGS.values():
        if keys is not None and spec.name not in keys:
            continue
        syns: list[Any] = []
        override = info.configs.get(spec.name)
        if override is not None:
            syns.append(_Synonym(name=spec.name, value=override, source=DYNAMIC_TOPIC_CONFIG))
        broker = spec.broker_value(ctx.config)
        broker_source = DEFAULT_CONFIG if broker == spec.kafka_default else STATIC_BROKER_CONFIG
        if spec.synonym is not None and broker is not None:
            syns.append(_Synonym(name=spec.synonym, value=broker, source=broker_source))
        value: str | None
        if override is not None:
            value, source = override, DYNAMIC_TOPIC_CONFIG
        elif broker is not None:
            value, source = broker, broker_source
        else:
            value, source = spec.kafka_default, DEFAULT_CONFIG
        out.append(
            _Entry(
                name=spec.name,
                value=value,
                read_only=False,
                is_default=source == DEFAULT_CONFIG,
                config_source=source,
                is_sensitive=False,
                synonyms=syns if synonyms else [],
                config_type=spec.type,
                documentation=spec.doc if docs else None,
            )
        )
    return out


def _broker_entries(
    ctx: BrokerContext, name: str, keys: set[str] | None, synonyms: bool, docs: bool
) -> list[Any]:
    _check_broker(ctx, name)
    out = []
    entries = [
        *broker_entries(ctx.config),
        *listener_entries(ctx.config, ctx.listeners),
        *schema_registry_entries(ctx.schema_registry_url),
    ]
    for entry in entries:
        if keys is not None and entry.name not in keys:
            continue
        out.append(
            _Entry(
                name=entry.name,
                value=entry.value,
                read_only=True,
                is_default=entry.source == DEFAULT_CONFIG,
                config_source=entry.source,
                is_sensitive=entry.sensitive,
                synonyms=[_Synonym(name=entry.name, value=entry.value, source=entry.source)]
                if synonyms
                else [],
                config_type=entry.type,
                documentation=entry.doc if docs else None,
            )
        )
    return out


def handle_describe_configs(ctx: BrokerContext, rctx: RequestContext, req: Any) -> Any:
    """Describe topic and broker configs: every config of the table (or the keys asked
    for), with value, source, synonyms (v1+, when asked), type and documentation (v3+)."""
    version = rctx.api_version
    synonyms = bool(getattr(req, "include_synonyms", False))
    docs = bool(getattr(req, "include_documentation", False))
    results = []
    for r in req.resources:
        keys = None if r.configuration_keys is None else set(r.configuration_keys)
        base = {"resource_type": r.resource_type, "resource_name": r.resource_name}
        try:
            _authorize(ctx, rctx, r, Op.DESCRIBE_CONFIGS)
            if r.resource_type == GROUP:
                code, message, entries = describe_group_configs(
                    ctx, rctx, r.resource_name, keys, _Entry
                )
                if code != _errors.NONE:
                    raise _RequestError(code, message or "")
            elif r.resource_type == TOPIC:
                entries = _topic_entries(ctx, r.resource_name, keys, synonyms, docs)
            elif r.resource_type == BROKER:
                entries = _broker_entries(ctx, r.resource_name, keys, synonyms, docs)
            else:
                raise _RequestError(
                    _errors.INVALID_REQUEST, f"resource type {r.resource_type} not supported"
                )
        except _RequestError as exc:
            results.append(_Result(error_code=exc.code, error_message=str(exc), configs=[], **base))
            continue
        except (SeglogError, ValueError, OSError) as exc:
            results.append(
                _Result(
                    error_code=_errors.error_code(exc), error_message=str(exc), configs=[], **base
                )
            )
            continue
        results.append(_Result(error_code=0, error_message=None, configs=entries, **base))
    return DescribeConfigsResponse[version](throttle_time_ms=0, results=results)


def _apply(
    ctx: BrokerContext, rctx: RequestContext, r: Any, validate_only: bool, new_configs: Any
) -> tuple[int, str | None]:
    """Resolve one resource's change with ``new_configs(current) -> dict`` and apply it."""
    try:
        _authorize(ctx, rctx, r, Op.ALTER_CONFIGS)
        if r.resource_type == BROKER:
            _check_broker(ctx, r.resource_name)
            raise _RequestError(
                _errors.INVALID_REQUEST,
                "seglog's broker configs are static: set them with seglog serve flags",
            )
        if r.resource_type != TOPIC:
            raise _RequestError(
                _errors.INVALID_REQUEST, f"resource type {r.resource_type} not supported"
            )
        validate_topic_name(r.resource_name)
        info = ctx.topics.get(r.resource_name)
        if info is None:
            raise UnknownTopicError(f"unknown topic {r.resource_name!r}")
        configs = new_configs(dict(info.configs))
        validate_topic_configs(configs)
        validate_remote_storage(
            configs,
            store=ctx.config.remote_storage_url is not None,
            was_enabled=info.configs.get(REMOTE_STORAGE_ENABLE, "false").lower() == "true",
            default_cleanup_policy=ctx.config.log_cleanup_policy,
        )
        if validate_only:
            defaults = ctx.topics.data_dir.default_config.to_kafka_configs()
            LogConfig.from_kafka_configs({**defaults, **configs})  # ValueError if bad
        else:
            ctx.topics.alter_configs(r.resource_name, configs)
    except _RequestError as exc:
        return exc.code, str(exc)
    except (SeglogError, ValueError, OSError) as exc:
        return _errors.error_code(exc), str(exc)
    return 0, None


def handle_alter_configs(ctx: BrokerContext, rctx: RequestContext, req: Any) -> Any:
    """AlterConfigs: a topic's overrides become exactly the configs given (Kafka's
    legacy replace semantics; a null value is 40 INVALID_CONFIG)."""
    version = rctx.api_version

    def replace(r: Any) -> Any:
        def new(_current: dict[str, str]) -> dict[str, str]:
            out = {}
            for c in r.configs:
                if c.value is None:
                    raise ValueError(f"Null value not supported for topic config {c.name}")
                out[c.name] = c.value
            return out

        return new

    responses = []
    for r in req.resources:
        if r.resource_type == GROUP:
            code, message = alter_group_configs(
                ctx, rctx, r, validate_only=req.validate_only, incremental=False
            )
        else:
            code, message = _apply(ctx, rctx, r, req.validate_only, replace(r))
        responses.append(
            _AlterResult(
                error_code=code,
                error_message=message,
                resource_type=r.resource_type,
                resource_name=r.resource_name,
            )
        )
    return AlterConfigsResponse[version](throttle_time_ms=0, responses=responses)


def _incremental(ctx: BrokerContext, r: Any) -> Any:
    def new(current: dict[str, str]) -> dict[str, str]:
        names = [c.name for c in r.configs]
        dup = {n for n in names if names.count(n) > 1}
        if dup:
            raise _RequestError(_errors.INVALID_REQUEST, f"config(s) named twice: {sorted(dup)}")
        out = dict(current)
        for c in r.configs:
            spec = TOPIC_CONFIGS.get(c.name)
            if spec is None:
                raise ValueError(f"Unknown topic config name: {c.name}")
            if c.config_operation == SET:
                if c.value is None:
                    raise ValueError(f"Null value not supported for topic config {c.name}")
                out[c.name] = c.value
            elif c.config_operation == DELETE:
                out.pop(c.name, None)
            elif c.config_operation in (APPEND, SUBTRACT):
                if spec.type != 7:  # LIST
                    raise ValueError(f"Config {c.name} is not a list: APPEND/SUBTRACT need a list")
                base = out.get(c.name, spec.broker_value(ctx.config))
                items = [x.strip() for x in (base or "").split(",") if x.strip()]
                given = [x.strip() for x in (c.value or "").split(",") if x.strip()]
                if c.config_operation == APPEND:
                    items += [x for x in given if x not in items]
                else:
                    items = [x for x in items if x not in given]
                out[c.name] = ",".join(items)
            else:
                raise _RequestError(
                    _errors.INVALID_REQUEST, f"unknown config operation {c.config_operation}"
                )
        return out

    return new


def handle_incremental_alter_configs(ctx: BrokerContext, rctx: RequestContext, req: Any) -> Any:
    """IncrementalAlterConfigs: per config SET (0), DELETE (1: back to the broker's
    value), APPEND (2) / SUBTRACT (3) for list configs (cleanup.policy)."""
    version = rctx.api_version
    responses = []
    for r in req.resources:
        if r.resource_type == GROUP:
            code, message = alter_group_configs(
                ctx, rctx, r, validate_only=req.validate_only, incremental=True
            )
        else:
            code, message = _apply(ctx, rctx, r, req.validate_only, _incremental(ctx, r))
        responses.append(
            _IncResult(
                error_code=code,
                error_message=message,
                resource_type=r.resource_type,
                resource_name=r.resource_name,
            )
        )
    return IncrementalAlterConfigsResponse[version](throttle_time_ms=0, responses=responses)


def handle_list_config_resources(ctx: BrokerContext, rctx: RequestContext, req: Any) -> Any:
    """The config resources of the types asked for (v1; none: all) or the client-metrics
    subscriptions (v0): groups with configs, this broker and every topic (see the module
    docstring)."""
    version = rctx.api_version
    resp = ListConfigResourcesResponse[version]
    if not rctx.allowed(Op.DESCRIBE_CONFIGS, Res.CLUSTER, CLUSTER_NAME):
        return resp(
            throttle_time_ms=0, error_code=_errors.CLUSTER_AUTHORIZATION_FAILED, config_resources=[]
        )
    asked = set(req.resource_types) if version >= 1 else {CLIENT_METRICS}
    if asked - set(LISTABLE):
        return resp(throttle_time_ms=0, error_code=_errors.UNSUPPORTED_VERSION, config_resources=[])
    state = ctx.share_groups.state
    names: dict[int, list[str]] = {
        GROUP: sorted(g for g in state.groups() if state.configs(g)),
        BROKER: [str(ctx.config.node_id)],
        TOPIC: sorted(ctx.topics.all()),
    }
    rows = [
        resp.ConfigResource(resource_name=name, resource_type=resource_type)
        for resource_type in LISTABLE
        if not asked or resource_type in asked
        for name in names.get(resource_type, [])
    ]
    return resp(throttle_time_ms=0, error_code=0, config_resources=rows)
