"""Who may use the schema registry: HTTP Basic authentication against the broker's SCRAM
credentials (``seglog user add``: the password is checked as SASL/PLAIN checks it), and
ACLs through the broker's authorizer.

Resources (Kafka's ACL resource types, so ``seglog acl add`` and every Kafka admin client
grant them; Confluent's own Subject / SchemaRegistry resource types exist only in its
commercial authorizer): a subject is the TOPIC its name stands for under the
TopicNameStrategy (``orders-value`` and ``orders-key`` → topic ``orders``; any other
subject → the topic of its own name), so whoever may write a topic may register its
schemas, as the serializers of its producers do; the global config and mode are the
CLUSTER resource.

| request                                          | operation          | resource        |
|--------------------------------------------------|--------------------|-----------------|
| read a subject's versions, look up, check, by id | DESCRIBE           | TOPIC (subject) |
| register                                         | WRITE              | TOPIC (subject) |
| delete a subject or a version                    | DELETE             | TOPIC (subject) |
| read / change a subject's config or mode  | DESCRIBE_CONFIGS / ALTER_CONFIGS | TOPIC    |
| read / change the global config or mode   | DESCRIBE_CONFIGS / ALTER_CONFIGS | CLUSTER  |

READ, WRITE, DELETE and ALTER imply DESCRIBE, as in Kafka; a schema by id needs DESCRIBE
on one of the subjects holding it; ``GET /subjects`` lists only the subjects allowed.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import time

from seglog.broker.security.authorizer import CLUSTER_NAME, Authorizer, Res
from seglog.broker.security.scram_store import CredentialStore

__all__ = ["ANONYMOUS", "Access", "topic_of"]

ANONYMOUS = "User:ANONYMOUS"
_CACHE_S = 30.0  # a checked password is trusted this long (PBKDF2 costs ms per check)


def topic_of(subject: str) -> str:
    """The topic a subject stands for (TopicNameStrategy), its ACL resource name."""
    for suffix in ("-value", "-key"):
        if subject.endswith(suffix) and len(subject) > len(suffix):
            return subject[: -len(suffix)]
    return subject


class Access:
    """Authentication (when ``credentials`` is given: the broker has SASL listeners) and
    authorization (``authorizer``; None: everything allowed)."""

    def __init__(self, credentials: CredentialStore | None, authorizer: Authorizer | None) -> None:
        self.credentials = credentials
        self.authorizer = authorizer
        self._checked: dict[tuple[str, bytes], float] = {}

    def principal(self, authorization: str | None) -> str | None:
        """The principal of a request's ``Authorization`` header (``User:NAME``;
        ANONYMOUS without authentication), None when authentication fails."""
        if self.credentials is None:
            return ANONYMOUS
        scheme, _sep, encoded = (authorization or "").partition(" ")
        if scheme.lower() != "basic":
            return None
        try:
            user, sep, password = base64.b64decode(encoded, validate=True).decode().partition(":")
        except (binascii.Error, UnicodeDecodeError):
            return None
        if not sep or not user:
            return None
        key = (user, hashlib.sha256(password.encode()).digest())
        now = time.monotonic()
        if self._checked.get(key, 0.0) > now:
            return f"User:{user}"
        if not self.credentials.check_plain(user, password):
            return None
        if len(self._checked) > 10_000:
            self._checked.clear()
        self._checked[key] = now + _CACHE_S
        return f"User:{user}"

    def allowed(self, principal: str, host: str, operation: int, subject: str | None) -> bool:
        """Whether ``principal`` may do ``operation`` on a subject (None: the registry's
        global config / mode, the CLUSTER resource)."""
        if self.authorizer is None:
            return True
        if subject is None:
            return self.authorizer.authorize(principal, host, operation, Res.CLUSTER, CLUSTER_NAME)
        return self.authorizer.authorize(principal, host, operation, Res.TOPIC, topic_of(subject))
