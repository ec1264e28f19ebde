"""Group configs (Kafka's GROUP config resource, type 32; KIP-848 / KIP-932): the
share-group configs of ``coordinator/share_state.py``'s ``GROUP_CONFIGS``
(``share.auto.offset.reset``), for DescribeConfigs, AlterConfigs and
IncrementalAlterConfigs (``apis/configs.py`` hands GROUP resources here).

ACLs: DESCRIBE_CONFIGS / ALTER_CONFIGS on the group (30 GROUP_AUTHORIZATION_FAILED).
A name not served or a value not allowed is 40 INVALID_CONFIG, an empty group id 24
INVALID_GROUP_ID; SET (0) and DELETE (1: back to the default) only (APPEND / SUBTRACT:
40, these are not lists). The configs are stored in ``__share_group_state`` and fsynced
before the answer; a change applies to share partitions the group opens afterwards
(``share.auto.offset.reset`` is read when a share partition is first initialised).
Sources: 8 DYNAMIC_GROUP_CONFIG (an override), 5 DEFAULT_CONFIG.
"""

from __future__ import annotations

from typing import Any

from seglog.broker.context import BrokerContext, RequestContext
from seglog.broker.coordinator.share_state import GROUP_CONFIGS, validate_group_config
from seglog.broker.protocol import errors as _errors
from seglog.broker.security.authorizer import Op, Res
from seglog.errors import SeglogError

__all__ = ["GROUP", "alter_group_configs", "describe_group_configs"]

GROUP = 32
"""Kafka's ``ConfigResource.Type.GROUP``."""
DYNAMIC_GROUP_CONFIG, DEFAULT_CONFIG = 8, 5
_STRING = 2
SET, DELETE = 0, 1


def describe_group_configs(
    ctx: BrokerContext, rctx: RequestContext, name: str, keys: set[str] | None, entry: Any
) -> tuple[int, str | None, list[Any]]:
    """(error code, message, entries) for one GROUP resource; ``entry`` is the response's
    config class (``DescribeConfigsResourceResult`` of the request's version)."""
    if not name:
        return _errors.INVALID_GROUP_ID, "empty group id", []
    if not rctx.allowed(Op.DESCRIBE_CONFIGS, Res.GROUP, name):
        return _errors.GROUP_AUTHORIZATION_FAILED, "not authorized", []
    overrides = ctx.share_groups.state.configs(name)
    out = []
    for config, (default, _allowed) in GROUP_CONFIGS.items():
        if keys is not None and config not in keys:
            continue
        value = overrides.get(config)
        source = DEFAULT_CONFIG if value is None else DYNAMIC_GROUP_CONFIG
        out.append(
            entry(
                name=config,
                value=default if value is None else value,
                read_only=False,
                is_default=value is None,
                config_source=source,
                is_sensitive=False,
                synonyms=[],
                config_type=_STRING,
                documentation=None,
            )
        )
    return _errors.NONE, None, out


def alter_group_configs(
    ctx: BrokerContext,
    rctx: RequestContext,
    r: Any,
    *,
    validate_only: bool,
    incremental: bool,
) -> tuple[int, str | None]:
    """Apply one GROUP resource of an (Incremental)AlterConfigs request: (error, message).
    Non-incremental AlterConfigs replaces every override with the configs given."""
    name = r.resource_name
    if not name:
        return _errors.INVALID_GROUP_ID, "empty group id"
    if not rctx.allowed(Op.ALTER_CONFIGS, Res.GROUP, name):
        return _errors.GROUP_AUTHORIZATION_FAILED, "not authorized"
    configs = ctx.share_groups.state.configs(name) if incremental else {}
    try:
        for c in r.configs:
            op = c.config_operation if incremental else SET
            if op == SET:
                if c.value is None:
                    raise ValueError(f"Null value not supported for group config {c.name}")
                validate_group_config(c.name, c.value)
                configs[c.name] = c.value
            elif op == DELETE:
                validate_group_config(c.name, None)
                configs.pop(c.name, None)
            else:
                raise ValueError(f"Config {c.name} is not a list: APPEND/SUBTRACT need a list")
        if not validate_only:
            ctx.share_groups.set_configs(name, configs)
    except (SeglogError, ValueError, OSError) as exc:
        return _errors.error_code(exc), str(exc)
    return _errors.NONE, None
