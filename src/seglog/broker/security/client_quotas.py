"""Client quota configs, Kafka's model (KIP-13, KIP-55, KIP-546, KIP-599, KIP-612): what
DescribeClientQuotas shows, AlterClientQuotas changes, and which quota applies to a client.

An entity is a mapping of entity types to names, a None name being the type's default
(``<default>``): ``{"user": "alice"}``, ``{"user": None, "client-id": "app"}``,
``{"client-id": None}``, ``{"ip": "10.0.0.1"}``, ``{"ip": None}``. User and client-id
entities take the keys ``producer_byte_rate`` and ``consumer_byte_rate`` (bytes/s,
integral), ``request_percentage`` (% of one request-handling thread) and
``controller_mutation_rate`` (partition mutations/s); ip entities take
``connection_creation_rate`` (connections/s, integral). ``user`` and ``client-id`` may be
combined; ``ip`` stands alone (Kafka's ``ClientQuotaControlManager``). The user of a
request is its principal's name (``User:alice`` → ``alice``; ``ANONYMOUS`` without
authentication).

Which quota applies to (user, client id), per key (Kafka's docs, "Quotas"; the first
configured one wins): user+client-id, user+default client-id, user, default
user+client-id, default user+default client-id, default user, client-id, default
client-id. The entity that wins also says who shares the quota (Kafka's
``DefaultQuotaCallback`` metric tags): a user-only quota is shared by all of the user's
clients, a default-user quota is per user, and so on.

Persisted as ``<data-dir>/client-quotas.json`` (atomic write, fsynced) and loaded on start.
Validation errors are :class:`QuotaError` with Kafka's code: 42 INVALID_REQUEST (unknown
key or entity type in an alteration, bad value, bad filter), 35 UNSUPPORTED_VERSION (a
describe filter's unknown entity type, as Kafka's ``ClientQuotasImage``).
"""

from __future__ import annotations

import ipaddress
import json
import math
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import NamedTuple

from seglog.broker.protocol import errors as _errors
from seglog.storage import atomic_write

__all__ = [
    "CLIENT_ID",
    "CONNECTION_CREATION_RATE",
    "CONSUMER_BYTE_RATE",
    "CONTROLLER_MUTATION_RATE",
    "IP",
    "MATCH_ANY",
    "MATCH_DEFAULT",
    "MATCH_EXACT",
    "PRODUCER_BYTE_RATE",
    "QUOTAS_FILE",
    "REQUEST_PERCENTAGE",
    "USER",
    "Entity",
    "FilterComponent",
    "QuotaError",
    "QuotaStore",
    "Resolved",
]

USER, CLIENT_ID, IP = "user", "client-id", "ip"
PRODUCER_BYTE_RATE = "producer_byte_rate"
CONSUMER_BYTE_RATE = "consumer_byte_rate"
REQUEST_PERCENTAGE = "request_percentage"
CONTROLLER_MUTATION_RATE = "controller_mutation_rate"
CONNECTION_CREATION_RATE = "connection_creation_rate"
MATCH_EXACT, MATCH_DEFAULT, MATCH_ANY = 0, 1, 2  # DescribeClientQuotas match types
QUOTAS_FILE = "client-quotas.json"

_INTEGRAL = {PRODUCER_BYTE_RATE, CONSUMER_BYTE_RATE, CONNECTION_CREATION_RATE}
_CLIENT_KEYS = (
    PRODUCER_BYTE_RATE,
    CONSUMER_BYTE_RATE,
    REQUEST_PERCENTAGE,
    CONTROLLER_MUTATION_RATE,
)
_IP_KEYS = (CONNECTION_CREATION_RATE,)

Entity = tuple[tuple[str, str | None], ...]
"""An entity as sorted (entity type, name) pairs; a None name is the default."""


class QuotaError(ValueError):
    """A request the quota rules refuse, with Kafka's error code."""

    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code = code


class FilterComponent(NamedTuple):
    """One DescribeClientQuotas filter component: match 0 exact (``match`` the name),
    1 the default entity, 2 any name of the type (defaults included)."""

    entity_type: str
    match_type: int
    match: str | None


class Resolved(NamedTuple):
    """The quota that applies to a client for one key: its bound and the entity sharing
    it, as (user, client id) tags ("" when the quota is not per that part)."""

    bound: float
    user: str
    client_id: str


def make_entity(parts: Iterable[tuple[str, str | None]]) -> Entity:
    """An :data:`Entity` from (type, name) pairs. Raises QuotaError 42 when it is empty, a
    type repeats or is unknown, a name is empty, or ip is combined with another type."""
    pairs = list(parts)
    types = [t for t, _n in pairs]
    if not pairs:
        raise QuotaError(_errors.INVALID_REQUEST, "Invalid empty client quota entity")
    for entity_type, name in pairs:
        if types.count(entity_type) > 1:
            raise QuotaError(
                _errors.INVALID_REQUEST, f"duplicate entity entry {entity_type} in the entity"
            )
        if entity_type not in (USER, CLIENT_ID, IP):
            raise QuotaError(
                _errors.INVALID_REQUEST, f"Unhandled client quota entity type: {entity_type}"
            )
        if name is not None and not name:
            raise QuotaError(_errors.INVALID_REQUEST, f"Empty {entity_type} not supported")
    if IP in types and len(types) > 1:
        raise QuotaError(
            _errors.INVALID_REQUEST, "an ip entity cannot be combined with user or client-id"
        )
    return tuple(sorted(pairs))


def _keys_for(entity: Entity) -> tuple[str, ...]:
    return _IP_KEYS if entity[0][0] == IP else _CLIENT_KEYS


def _check_value(entity: Entity, key: str, value: float) -> None:
    if key not in _keys_for(entity):
        raise QuotaError(_errors.INVALID_REQUEST, f"Invalid configuration key {key}")
    if not math.isfinite(value) or value <= 0:
        raise QuotaError(
            _errors.INVALID_REQUEST, f"Configuration {key} must be a positive number, not {value}"
        )
    if key in _INTEGRAL and abs(value - round(value)) > 1e-6:
        raise QuotaError(_errors.INVALID_REQUEST, f"Configuration {key} must be a Long value")


def _check_ip(entity: Entity) -> None:
    name = entity[0][1]
    if entity[0][0] == IP and name is not None:
        try:
            ipaddress.ip_address(name)
        except ValueError:
            raise QuotaError(_errors.INVALID_REQUEST, f"{name} is not a valid IP") from None


class QuotaStore:
    """The client quota configs of a data directory: {entity: {key: value}}."""

    def __init__(self, data_dir: Path) -> None:
        self._path = data_dir / QUOTAS_FILE
        self.quotas: dict[Entity, dict[str, float]] = {}
        self.keys: frozenset[str] = frozenset()
        """The quota keys some entity sets (a request checks nothing else: no lookup for
        a key nobody sets, on the hot path)."""
        if self._path.exists():
            doc = json.loads(self._path.read_text())
            for row in doc["quotas"]:
                entity = tuple(sorted((t, n) for t, n in row["entity"]))
                self.quotas[entity] = {k: float(v) for k, v in row["values"].items()}
        self._update_keys()

    def _update_keys(self) -> None:
        self.keys = frozenset(k for values in self.quotas.values() for k in values)

    def _save(self) -> None:
        rows = [
            {"entity": [list(p) for p in entity], "values": values}
            for entity, values in sorted(self.quotas.items(), key=lambda e: repr(e[0]))
        ]
        atomic_write(self._path, json.dumps({"quotas": rows}, indent=1).encode())

    # -- AlterClientQuotas --------------------------------------------------------------

    def check_alteration(
        self, parts: Iterable[tuple[str, str | None]], ops: Iterable[tuple[str, float, bool]]
    ) -> tuple[Entity, dict[str, float | None]]:
        """Validate one entry of AlterClientQuotas: its entity and its (key, value,
        remove) ops. Returns the entity and {key: new value, None to remove}. Raises
        QuotaError 42 INVALID_REQUEST (bad entity, unknown key, value not positive or not
        integral for a byte or connection rate, a key twice)."""
        entity = make_entity(parts)
        _check_ip(entity)
        changes: dict[str, float | None] = {}
        for key, value, remove in ops:
            if key in changes:
                raise QuotaError(_errors.INVALID_REQUEST, f"Duplicate quota key {key}")
            if remove:
                if key not in _keys_for(entity):
                    raise QuotaError(_errors.INVALID_REQUEST, f"Invalid configuration key {key}")
                changes[key] = None
            else:
                _check_value(entity, key, value)
                changes[key] = float(value)
        return entity, changes

    def apply(self, alterations: Iterable[tuple[Entity, Mapping[str, float | None]]]) -> None:
        """Apply checked alterations (:meth:`check_alteration`) and persist once."""
        changed = False
        for entity, changes in alterations:
            values = dict(self.quotas.get(entity, {}))
            for key, value in changes.items():
                if value is None:
                    values.pop(key, None)
                else:
                    values[key] = value
            if values != self.quotas.get(entity, {}):
                changed = True
            if values:
                self.quotas[entity] = values
            else:
                self.quotas.pop(entity, None)
        if changed:
            self._update_keys()
            self._save()

    # -- DescribeClientQuotas -----------------------------------------------------------

    def describe(
        self, components: Iterable[FilterComponent], strict: bool
    ) -> list[tuple[Entity, dict[str, float]]]:
        """The entities matching the filter with their values (Kafka's
        ``ClientQuotasImage.describe``): every component must match one of the entity's
        parts; ``strict`` also wants no other part. Raises QuotaError: 42 for a type given
        twice, an exact match without a name or a default/any match with one, an unknown
        match type, or ip combined with user/client-id; 35 for an unknown entity type."""
        wanted: dict[str, FilterComponent] = {}
        for c in components:
            if not c.entity_type:
                raise QuotaError(_errors.INVALID_REQUEST, "Invalid empty entity type.")
            if c.entity_type in wanted:
                raise QuotaError(
                    _errors.INVALID_REQUEST,
                    f"Entity type {c.entity_type} cannot appear more than once in the filter.",
                )
            if c.entity_type not in (USER, CLIENT_ID, IP):
                raise QuotaError(
                    _errors.UNSUPPORTED_VERSION, f"Unsupported entity type {c.entity_type}"
                )
            if c.match_type == MATCH_EXACT and c.match is None:
                raise QuotaError(
                    _errors.INVALID_REQUEST,
                    "Request specified MATCH_TYPE_EXACT, but set match string to null.",
                )
            if c.match_type in (MATCH_DEFAULT, MATCH_ANY) and c.match is not None:
                raise QuotaError(
                    _errors.INVALID_REQUEST,
                    f"Request specified match type {c.match_type}, but also a match string.",
                )
            if c.match_type not in (MATCH_EXACT, MATCH_DEFAULT, MATCH_ANY):
                raise QuotaError(_errors.INVALID_REQUEST, f"Unknown match type {c.match_type}")
            wanted[c.entity_type] = c
        if IP in wanted and len(wanted) > 1:
            raise QuotaError(
                _errors.INVALID_REQUEST,
                "Invalid entity filter component combination. IP filter component should "
                "not be used with user or clientId filter component.",
            )
        out = []
        for entity, values in self.quotas.items():
            parts = dict(entity)
            if strict and len(parts) != len(wanted):
                continue
            if all(_component_matches(c, parts) for c in wanted.values()):
                out.append((entity, dict(values)))
        out.sort(key=lambda e: repr(e[0]))
        return out

    # -- enforcement --------------------------------------------------------------------

    def resolve(self, key: str, user: str, client_id: str) -> Resolved | None:
        """The quota of ``key`` applying to (user, client id), with who shares it; None
        when none applies (Kafka's precedence, see the module doc)."""
        if key not in self.keys:
            return None
        q = self.quotas
        candidates = (
            (((CLIENT_ID, client_id), (USER, user)), user, client_id),
            (((CLIENT_ID, None), (USER, user)), user, client_id),
            (((USER, user),), user, ""),
            (((CLIENT_ID, client_id), (USER, None)), user, client_id),
            (((CLIENT_ID, None), (USER, None)), user, client_id),
            (((USER, None),), user, ""),
            (((CLIENT_ID, client_id),), "", client_id),
            (((CLIENT_ID, None),), "", client_id),
        )
        for entity, tag_user, tag_client in candidates:
            values = q.get(entity)
            if values is not None and key in values:
                return Resolved(values[key], tag_user, tag_client)
        return None

    def ip_rate(self, host: str) -> float | None:
        """``connection_creation_rate`` of ``host``: its own, else the default ip
        entity's; None without either."""
        for entity in (((IP, host),), ((IP, None),)):
            values = self.quotas.get(entity)
            if values is not None and CONNECTION_CREATION_RATE in values:
                return values[CONNECTION_CREATION_RATE]
        return None


def _component_matches(c: FilterComponent, parts: Mapping[str, str | None]) -> bool:
    if c.entity_type not in parts:
        return False
    name = parts[c.entity_type]
    if c.match_type == MATCH_EXACT:
        return name == c.match
    if c.match_type == MATCH_DEFAULT:
        return name is None
    return True
