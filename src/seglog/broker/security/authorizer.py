"""ACLs and the authorizer, Kafka's model (``StandardAuthorizer``).

An ACL binds a resource pattern (type, name, LITERAL or PREFIXED; the literal name ``*``
matches every name) to a principal (``User:alice``, ``User:*``), a host (``*`` or an IP),
an operation and ALLOW or DENY. A request by a principal from a host for an operation on
a resource is allowed when the principal is a super user; else denied if a matching DENY
exists; else allowed if a matching ALLOW exists for the operation, ALL, or an operation
that implies it (READ, WRITE, DELETE, ALTER imply DESCRIBE; ALTER_CONFIGS implies
DESCRIBE_CONFIGS); else, when no ACL at all matches the resource, allowed only with
``allow.everyone.if.no.acl.found``. With no authorizer configured everything is allowed.
ACLs persist in ``<data-dir>/acls.json`` (atomic write, fsynced).

Codes are Kafka's: resource types TOPIC 2, GROUP 3, CLUSTER 4, TRANSACTIONAL_ID 5;
pattern types ANY 1, MATCH 2, LITERAL 3, PREFIXED 4; operations ANY 1, ALL 2, READ 3,
WRITE 4, CREATE 5, DELETE 6, ALTER 7, DESCRIBE 8, CLUSTER_ACTION 9, DESCRIBE_CONFIGS 10,
ALTER_CONFIGS 11, IDEMPOTENT_WRITE 12; permissions ANY 1, DENY 2, ALLOW 3.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path
from typing import NamedTuple

from seglog.storage import atomic_write

__all__ = [
    "CLUSTER_NAME",
    "Acl",
    "AclFilter",
    "Authorizer",
    "Op",
    "Res",
]

CLUSTER_NAME = "kafka-cluster"  # the one CLUSTER resource's name


class Res:
    """Resource types."""

    ANY, TOPIC, GROUP, CLUSTER, TRANSACTIONAL_ID = 1, 2, 3, 4, 5


class Op:
    """Operations."""

    ANY, ALL, READ, WRITE, CREATE, DELETE, ALTER, DESCRIBE = 1, 2, 3, 4, 5, 6, 7, 8
    CLUSTER_ACTION, DESCRIBE_CONFIGS, ALTER_CONFIGS, IDEMPOTENT_WRITE = 9, 10, 11, 12


ANY_PATTERN, MATCH, LITERAL, PREFIXED = 1, 2, 3, 4
ANY_PERMISSION, DENY, ALLOW = 1, 2, 3
_IMPLIED = {
    Op.DESCRIBE: {Op.READ, Op.WRITE, Op.DELETE, Op.ALTER},
    Op.DESCRIBE_CONFIGS: {Op.ALTER_CONFIGS},
}
_VALID = {
    "resource_type": {Res.TOPIC, Res.GROUP, Res.CLUSTER, Res.TRANSACTIONAL_ID},
    "pattern_type": {LITERAL, PREFIXED},
    "operation": set(range(2, 13)),
    "permission_type": {DENY, ALLOW},
}


class Acl(NamedTuple):
    """One ACL binding."""

    resource_type: int
    resource_name: str
    pattern_type: int
    principal: str
    host: str
    operation: int
    permission_type: int

    def validate(self) -> None:
        """Raises ValueError when a field is not a concrete value or the resource name is
        empty (Kafka: 42 INVALID_REQUEST, in ``AclControlManager.validateNewAcl``'s order
        and with its message for the name)."""
        for field, allowed in _VALID.items():
            if getattr(self, field) not in allowed:
                raise ValueError(f"invalid {field} {getattr(self, field)} for an ACL")
        if not self.resource_name:
            raise ValueError("Resource name should not be empty")
        if not self.principal.startswith("User:") or not self.host:
            raise ValueError("principal must be User:NAME (or User:*) and host * or an address")
        if self.resource_type == Res.CLUSTER and self.resource_name != CLUSTER_NAME:
            raise ValueError(f"the cluster resource is named {CLUSTER_NAME}")

    def matches_resource(self, resource_type: int, name: str) -> bool:
        """Whether this ACL's pattern covers the resource."""
        if self.resource_type != resource_type:
            return False
        if self.pattern_type == PREFIXED:
            return name.startswith(self.resource_name)
        return self.resource_name in ("*", name)


class AclFilter(NamedTuple):
    """A DescribeAcls / DeleteAcls filter (None or ANY matches anything)."""

    resource_type: int
    resource_name: str | None
    pattern_type: int
    principal: str | None
    host: str | None
    operation: int
    permission_type: int

    def matches(self, acl: Acl) -> bool:
        """Kafka's AclBindingFilter semantics (MATCH: the patterns that would apply to the
        named resource)."""
        if self.resource_type not in (Res.ANY, acl.resource_type):
            return False
        if self.pattern_type == MATCH:
            if self.resource_name is not None and not acl.matches_resource(
                acl.resource_type, self.resource_name
            ):
                return False
        else:
            if self.pattern_type not in (ANY_PATTERN, acl.pattern_type):
                return False
            if self.resource_name is not None and acl.resource_name != self.resource_name:
                return False
        return (
            (self.principal is None or acl.principal == self.principal)
            and (self.host is None or acl.host == self.host)
            and (self.operation in (Op.ANY, acl.operation))
            and (self.permission_type in (ANY_PERMISSION, acl.permission_type))
        )


class Authorizer:
    """The ACLs of a data directory and the rule that applies them. ``enabled`` False
    allows everything (no ``--authorizer``)."""

    def __init__(
        self,
        data_dir: Path,
        *,
        enabled: bool,
        super_users: Iterable[str] = (),
        allow_if_no_acl: bool = False,
    ) -> None:
        self.enabled = enabled
        self.super_users = frozenset(super_users)
        self.allow_if_no_acl = allow_if_no_acl
        self._path = data_dir / "acls.json"
        self.acls: list[Acl] = []
        if self._path.exists():
            self.acls = [Acl(*row) for row in json.loads(self._path.read_text())["acls"]]

    def _save(self) -> None:
        atomic_write(self._path, json.dumps({"acls": [list(a) for a in self.acls]}).encode())

    def add(self, acls: list[Acl]) -> None:
        """Add bindings (duplicates ignored) and persist."""
        for acl in acls:
            if acl not in self.acls:
                self.acls.append(acl)
        self._save()

    def remove(self, flt: AclFilter) -> list[Acl]:
        """Remove and return the bindings matching ``flt`` (persisted)."""
        gone = [a for a in self.acls if flt.matches(a)]
        if gone:
            self.acls = [a for a in self.acls if not flt.matches(a)]
            self._save()
        return gone

    def authorize(
        self, principal: str, host: str, operation: int, resource_type: int, name: str
    ) -> bool:
        """Whether ``principal`` from ``host`` may do ``operation`` on the resource."""
        if not self.enabled or principal in self.super_users:
            return True
        relevant = [a for a in self.acls if a.matches_resource(resource_type, name)]
        applies = [
            a for a in relevant
            if a.principal in (principal, "User:*") and a.host in ("*", host)
        ]  # fmt: skip
        wanted = {operation, Op.ALL} | _IMPLIED.get(operation, set())
        if any(a.permission_type == DENY and a.operation in (operation, Op.ALL) for a in applies):
            return False
        if any(a.permission_type == ALLOW and a.operation in wanted for a in applies):
            return True
        return not relevant and self.allow_if_no_acl
