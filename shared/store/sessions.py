"""Web sessions kept in Redis, so that they can be ended before they expire.

The browser's signed cookie carries only a random session id; the session itself
is a Redis key named by the id's SHA-256 (a copy of Redis grants no session),
expiring with the session, and listed in a per-user set so that every session of
an operator can be ended at once: at a password change, when the account is
disabled or removed. A session also records the account's generation when it
began; the web layer refuses it once the account's generation moved on, so a
sign-in racing a password change cannot outlive it.
"""

from __future__ import annotations

import hashlib
import re
import secrets
import time
from dataclasses import dataclass

import redis
from pydantic import BaseModel, ValidationError

from shared.errors import CorruptRecord, InvalidInput
from shared.store.connection import storage_errors
from shared.store.keys import KeySpace

__all__ = ["Session", "SessionStore"]

_SESSION_ID = re.compile(r"[A-Za-z0-9_-]{40,64}")


class _SessionRecord(BaseModel):
    username: str
    generation: int
    created_at: float


@dataclass(frozen=True)
class Session:
    """A live session: whose, of which account generation, since when."""

    username: str
    generation: int
    created_at: float


def _digest(session_id: str) -> str:
    return hashlib.sha256(session_id.encode()).hexdigest()


class SessionStore:
    """Sessions by id, and each user's set of them."""

    def __init__(self, client: redis.Redis, keys: KeySpace) -> None:
        self.client = client
        self.keys = keys

    def start(self, username: str, *, generation: int, lifetime_s: int) -> str:
        """A new session for `username`; returns its id, which only the cookie holds."""
        if lifetime_s <= 0:
            raise InvalidInput(f"session lifetime_s must be positive, got {lifetime_s}")
        session_id = secrets.token_urlsafe(32)
        digest = _digest(session_id)
        record = _SessionRecord(username=username, generation=generation, created_at=time.time())
        members = self.keys.user_sessions(username)
        with storage_errors(f"starting a session for {username}"):
            self._forget_expired(username)
            with self.client.pipeline(transaction=False) as pipe:
                pipe.set(self.keys.session(digest), record.model_dump_json(), ex=lifetime_s)
                pipe.sadd(members, digest)
                # The newest session expires last, so the set may go with it.
                pipe.expire(members, lifetime_s)
                pipe.execute()
        return session_id

    def get(self, session_id: str) -> Session | None:
        """The live session of this id; None when it ended, expired or never was."""
        if not isinstance(session_id, str) or not _SESSION_ID.fullmatch(session_id):
            return None
        key = self.keys.session(_digest(session_id))
        with storage_errors("reading a session"):
            raw = self.client.get(key)
        if raw is None:
            return None
        try:
            record = _SessionRecord.model_validate_json(str(raw))
        except ValidationError as exc:
            raise CorruptRecord(f"session {key} does not parse") from exc
        return Session(record.username, record.generation, record.created_at)

    def end(self, session_id: str) -> None:
        """Ends one session (sign-out); an unknown id is already ended."""
        found = self.get(session_id)
        if found is None:
            return
        digest = _digest(session_id)
        with storage_errors("ending a session"), self.client.pipeline(transaction=False) as pipe:
            pipe.delete(self.keys.session(digest))
            pipe.srem(self.keys.user_sessions(found.username), digest)
            pipe.execute()

    def end_all(self, username: str) -> int:
        """Ends every session of `username`; returns how many were live."""
        members = self.keys.user_sessions(username)
        with storage_errors(f"ending the sessions of {username}"):
            digests = [str(d) for d in self.client.smembers(members)]
            if not digests:
                return 0
            with self.client.pipeline(transaction=False) as pipe:
                for digest in digests:
                    pipe.delete(self.keys.session(digest))
                # Only these: a session started meanwhile stays listed, so it can be ended too.
                pipe.srem(members, *digests)
                deleted = pipe.execute()
        return sum(int(n) for n in deleted[:-1])

    def count(self, username: str) -> int:
        """How many sessions of `username` are live."""
        with storage_errors(f"counting the sessions of {username}"):
            return len(self._forget_expired(username))

    def _forget_expired(self, username: str) -> list[str]:
        """Drops expired sessions from the user's set; returns the live ones."""
        members = self.keys.user_sessions(username)
        digests = [str(d) for d in self.client.smembers(members)]
        if not digests:
            return []
        with self.client.pipeline(transaction=False) as pipe:
            for digest in digests:
                pipe.exists(self.keys.session(digest))
            alive = pipe.execute()
        gone = [d for d, live in zip(digests, alive, strict=True) if not live]
        if gone:
            self.client.srem(members, *gone)
        return [d for d, live in zip(digests, alive, strict=True) if live]
