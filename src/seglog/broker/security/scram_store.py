"""SCRAM credentials in ``<data-dir>/scram-credentials.json``: per user and mechanism
(SCRAM-SHA-256, SCRAM-SHA-512) the salt, stored key, server key and iteration count of
RFC 5802, made by the ``scramp`` library; passwords are never stored. Written with the
atomic-write helper (temp file, fsync, rename, directory fsync). The broker reloads the file
when it changes, so ``seglog user add`` takes effect on a running broker. PLAIN is checked
against the same credentials (the password is salted and iterated as SCRAM does, then
compared with the stored key).
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import os
from pathlib import Path

import scramp

from seglog.storage import atomic_write

__all__ = ["MECHANISMS", "CredentialStore"]

MECHANISMS = ("SCRAM-SHA-256", "SCRAM-SHA-512")
FILE = "scram-credentials.json"
DEFAULT_ITERATIONS = 8192
_HASHES = {"SCRAM-SHA-256": "sha256", "SCRAM-SHA-512": "sha512"}

AuthInfo = tuple[bytes, bytes, bytes, int]  # salt, stored key, server key, iterations


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


class CredentialStore:
    """The users of one data directory. Not thread-safe (the broker's event loop, or one
    CLI command)."""

    def __init__(self, data_dir: Path) -> None:
        self.path = data_dir / FILE
        self._users: dict[str, dict[str, AuthInfo]] = {}
        self._mtime: int | None = None

    def _reload(self) -> None:
        try:
            mtime = os.stat(self.path).st_mtime_ns
        except FileNotFoundError:
            self._users, self._mtime = {}, None
            return
        if mtime == self._mtime:
            return
        doc = json.loads(self.path.read_text())
        users: dict[str, dict[str, AuthInfo]] = {}
        for name, mechs in doc.get("users", {}).items():
            users[name] = {
                m: (
                    base64.b64decode(c["salt"]),
                    base64.b64decode(c["stored_key"]),
                    base64.b64decode(c["server_key"]),
                    int(c["iterations"]),
                )
                for m, c in mechs.items()
                if m in MECHANISMS
            }
        self._users, self._mtime = users, mtime

    def _save(self) -> None:
        doc = {
            "users": {
                name: {
                    m: {
                        "salt": _b64(s),
                        "stored_key": _b64(sk),
                        "server_key": _b64(vk),
                        "iterations": i,
                    }
                    for m, (s, sk, vk, i) in mechs.items()
                }
                for name, mechs in sorted(self._users.items())
            }
        }
        self.path.parent.mkdir(parents=True, exist_ok=True)
        atomic_write(self.path, json.dumps(doc, indent=1).encode())
        self._mtime = os.stat(self.path).st_mtime_ns

    def users(self) -> dict[str, list[str]]:
        """{user: [mechanisms with a credential]}."""
        self._reload()
        return {name: sorted(mechs) for name, mechs in sorted(self._users.items())}

    def set_password(
        self, user: str, password: str, mechanisms: tuple[str, ...] = MECHANISMS,
        iterations: int = DEFAULT_ITERATIONS,
    ) -> None:  # fmt: skip
        """Create or replace ``user``'s credentials (a fresh salt per mechanism). Raises
        ValueError on an empty user or password, an unknown mechanism, or fewer than 4096
        iterations (Kafka's minimum)."""
        if not user or not password:
            raise ValueError("user and password must not be empty")
        if iterations < 4096:
            raise ValueError("iterations must be at least 4096 (Kafka's minimum)")
        self._reload()
        creds = self._users.setdefault(user, {})
        for m in mechanisms:
            if m not in MECHANISMS:
                raise ValueError(f"mechanism {m!r}: one of {', '.join(MECHANISMS)}")
            salt, stored, server, its = scramp.ScramMechanism(m).make_auth_info(
                password, iteration_count=iterations
            )
            creds[m] = (salt, stored, server, its)
        self._save()

    def set_salted(
        self, user: str, mechanism: str, salt: bytes, salted: bytes, iterations: int
    ) -> None:
        """Store a credential from its salted password (AlterUserScramCredentials: the
        client salts and iterates; RFC 5802 derives the stored and server keys). Raises
        ValueError on an unknown mechanism or fewer than 4096 iterations."""
        if mechanism not in MECHANISMS:
            raise ValueError(f"mechanism {mechanism!r}: one of {', '.join(MECHANISMS)}")
        if not 4096 <= iterations <= 16384:
            raise ValueError("iterations must be in [4096, 16384] (Kafka's bounds)")
        if not user or not salt or not salted:
            raise ValueError("user, salt and salted password must not be empty")
        name = _HASHES[mechanism]
        client_key = hmac.new(salted, b"Client Key", name).digest()
        stored = hashlib.new(name, client_key).digest()
        server = hmac.new(salted, b"Server Key", name).digest()
        self._reload()
        self._users.setdefault(user, {})[mechanism] = (salt, stored, server, iterations)
        self._save()

    def iterations(self, user: str) -> dict[str, int]:
        """{mechanism: iterations} of ``user`` (empty for an unknown user)."""
        self._reload()
        return {m: info[3] for m, info in sorted(self._users.get(user, {}).items())}

    def delete(self, user: str, mechanisms: tuple[str, ...] = MECHANISMS) -> bool:
        """Remove ``user``'s credentials for these mechanisms; False if it had none."""
        self._reload()
        creds = self._users.get(user)
        if not creds:
            return False
        removed = [m for m in mechanisms if creds.pop(m, None) is not None]  # all of them
        found = bool(removed)
        if not creds:
            del self._users[user]
        if found:
            self._save()
        return found

    def auth_info(self, user: str, mechanism: str) -> AuthInfo:
        """The SCRAM auth info (scramp's ``auth_fn``). Raises KeyError for an unknown user."""
        self._reload()
        return self._users[user][mechanism]

    def check_plain(self, user: str, password: str) -> bool:
        """Whether ``password`` is ``user``'s (against any of its SCRAM credentials)."""
        self._reload()
        for mechanism, (salt, stored, _server, iterations) in self._users.get(user, {}).items():
            name = _HASHES[mechanism]
            salted = hashlib.pbkdf2_hmac(name, password.encode(), salt, iterations)
            client_key = hmac.new(salted, b"Client Key", name).digest()
            return hmac.compare_digest(hashlib.new(name, client_key).digest(), stored)
        return False
