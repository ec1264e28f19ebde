"""DescribeUserScramCredentials (API 50) and AlterUserScramCredentials (API 51): SCRAM
users managed over the wire (confluent-kafka's and kafka-python's admin clients), on the
same store as ``seglog user``. Describe needs DESCRIBE, alter ALTER on the cluster (31);
an unknown user is 91 RESOURCE_NOT_FOUND, a mechanism other than SCRAM-SHA-256 (1) or
SCRAM-SHA-512 (2) is 33 UNSUPPORTED_SASL_MECHANISM, a bad credential (iterations outside
[4096, 16384], empty salt) 93 UNACCEPTABLE_CREDENTIAL; a user named twice in one request
is 42 for every entry of that user.
"""

from __future__ import annotations

from typing import Any

from kafka.protocol.admin import (
    AlterUserScramCredentialsResponse,
    DescribeUserScramCredentialsResponse,
)

from seglog.broker.context import BrokerContext, RequestContext
from seglog.broker.protocol import errors as _errors
from seglog.broker.protocol.errors import (
    RESOURCE_NOT_FOUND,
    UNACCEPTABLE_CREDENTIAL,
    UNSUPPORTED_SASL_MECHANISM,
)
from seglog.broker.security.authorizer import CLUSTER_NAME, Op, Res
from seglog.broker.security.scram_store import CredentialStore

__all__ = [
    "handle_alter_user_scram_credentials",
    "handle_describe_user_scram_credentials",
]

_MECHANISM_CODES = {1: "SCRAM-SHA-256", 2: "SCRAM-SHA-512"}
_CODES = {name: code for code, name in _MECHANISM_CODES.items()}


def _store(ctx: BrokerContext) -> CredentialStore:
    if ctx.credentials is None:
        ctx.credentials = CredentialStore(ctx.config.data_dir)
    return ctx.credentials


def handle_describe_user_scram_credentials(
    ctx: BrokerContext, rctx: RequestContext, req: Any
) -> Any:
    """Mechanisms and iterations per user (all users when ``users`` is null)."""
    version = rctx.api_version
    resp = DescribeUserScramCredentialsResponse[version]
    result_cls = resp.DescribeUserScramCredentialsResult
    info_cls = result_cls.CredentialInfo
    if not rctx.allowed(Op.DESCRIBE, Res.CLUSTER, CLUSTER_NAME):
        return resp(
            throttle_time_ms=0, error_code=_errors.CLUSTER_AUTHORIZATION_FAILED,
            error_message=None, results=[],
        )  # fmt: skip
    store = _store(ctx)
    names = list(store.users()) if req.users is None else [u.name for u in req.users]
    results = []
    for name in names:
        iterations = store.iterations(name)
        if not iterations:
            results.append(
                result_cls(
                    user=name,
                    error_code=RESOURCE_NOT_FOUND,
                    error_message=f"no SCRAM credential for {name}",
                    credential_infos=[],
                )
            )
            continue
        infos = [info_cls(mechanism=_CODES[m], iterations=i) for m, i in iterations.items()]
        results.append(
            result_cls(user=name, error_code=0, error_message=None, credential_infos=infos)
        )
    return resp(throttle_time_ms=0, error_code=0, error_message=None, results=results)


def handle_alter_user_scram_credentials(ctx: BrokerContext, rctx: RequestContext, req: Any) -> Any:
    """Apply deletions and upsertions; one result per user."""
    version = rctx.api_version
    resp = AlterUserScramCredentialsResponse[version]
    result_cls = resp.AlterUserScramCredentialsResult
    allowed = rctx.allowed(Op.ALTER, Res.CLUSTER, CLUSTER_NAME)
    store = _store(ctx)
    outcome: dict[str, tuple[int, str | None]] = {}
    users = [d.name for d in req.deletions] + [u.name for u in req.upsertions]
    for d in req.deletions:
        mechanism = _MECHANISM_CODES.get(d.mechanism)
        if not allowed:
            outcome[d.name] = (_errors.CLUSTER_AUTHORIZATION_FAILED, None)
        elif mechanism is None:
            outcome[d.name] = (UNSUPPORTED_SASL_MECHANISM, f"mechanism {d.mechanism}")
        elif users.count(d.name) > 1:
            outcome[d.name] = (_errors.INVALID_REQUEST, "user named twice")
        elif not store.delete(d.name, (mechanism,)):
            outcome[d.name] = (RESOURCE_NOT_FOUND, f"no {mechanism} credential for {d.name}")
        else:
            outcome[d.name] = (0, None)
    for u in req.upsertions:
        mechanism = _MECHANISM_CODES.get(u.mechanism)
        if not allowed:
            outcome[u.name] = (_errors.CLUSTER_AUTHORIZATION_FAILED, None)
        elif mechanism is None:
            outcome[u.name] = (UNSUPPORTED_SASL_MECHANISM, f"mechanism {u.mechanism}")
        elif users.count(u.name) > 1:
            outcome[u.name] = (_errors.INVALID_REQUEST, "user named twice")
        else:
            try:
                store.set_salted(
                    u.name, mechanism, bytes(u.salt), bytes(u.salted_password), u.iterations
                )
                outcome[u.name] = (0, None)
            except ValueError as exc:
                outcome[u.name] = (UNACCEPTABLE_CREDENTIAL, str(exc))
    results = [result_cls(user=n, error_code=c, error_message=m) for n, (c, m) in outcome.items()]
    return resp(throttle_time_ms=0, results=results)
