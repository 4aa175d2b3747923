"""Who may use Signoff: operator accounts, API tokens with roles, and sign-in throttling.

Used by the web UI (sign-in, bearer tokens) and by the CLI (`signoff user add`).
Passwords are stored as werkzeug password hashes (scrypt); a token is stored as its
SHA-256 digest, and its plain value is returned once, when it is created.
"""

from __future__ import annotations

import functools
import hashlib
import re
import secrets
import time
from dataclasses import dataclass
from enum import Enum

import redis
from pydantic import BaseModel, ValidationError
from werkzeug.security import check_password_hash, generate_password_hash

from shared.errors import Conflict, CorruptRecord, InvalidInput, NotFound
from shared.keys import KeySpace
from shared.redis_client import storage_errors

__all__ = [
    "ApiToken",
    "LoginThrottle",
    "Role",
    "TokenRecord",
    "TokenStore",
    "UserRecord",
    "UserStore",
]

_USERNAME = re.compile(r"^[A-Za-z0-9_.@-]{1,64}$")
_MIN_PASSWORD = 8
_TOKEN_PREFIX = "so_"  # noqa: S105 (a marker, not a secret)
_TOKEN_ID_LENGTH = 12
_LOGIN_WINDOW_S = 60


class Role(str, Enum):
    """What a caller may do; each role includes the ones below it."""

    VIEWER = "viewer"  # reads
    SUBMITTER = "submitter"  # creates conversations, sends prompts, aborts, closes
    OPERATOR = "operator"  # also resolves notifications

    def allows(self, required: Role) -> bool:
        return _RANK[self] >= _RANK[required]


_RANK = {Role.VIEWER: 0, Role.SUBMITTER: 1, Role.OPERATOR: 2}


class UserRecord(BaseModel):
    """An operator account as stored."""

    password_hash: str
    created_at: float


class TokenRecord(BaseModel):
    """An API token as stored: never the token itself."""

    name: str
    role: Role
    created_at: float


@dataclass(frozen=True)
class ApiToken:
    """A token as callers see it; `token_id` (digest prefix) names it for revocation."""

    token_id: str
    name: str
    role: Role
    created_at: float


def _check_username(username: str) -> str:
    if not isinstance(username, str) or not _USERNAME.match(username):
        raise InvalidInput(f"username {username!r} must be 1-64 letters, digits or _ . @ -")
    return username


def _check_password(password: str) -> str:
    if len(password) < _MIN_PASSWORD:
        raise InvalidInput(f"password must be at least {_MIN_PASSWORD} characters")
    return password


@functools.cache
def _dummy_hash() -> str:
    """Verified against when a username is unknown, so both cases cost one hash."""
    return generate_password_hash(secrets.token_hex(16))


def token_digest(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


class UserStore:
    """Operator accounts: usernames with password hashes."""

    def __init__(self, client: redis.Redis, keys: KeySpace) -> None:
        self.client = client
        self.key = keys.users()

    def add(self, username: str, password: str) -> None:
        """Creates an account; Conflict when the username is taken."""
        record = self._record(_check_username(username), _check_password(password))
        with storage_errors(f"adding user {username}"):
            created = self.client.hsetnx(self.key, username, record.model_dump_json())
        if not created:
            raise Conflict(f"user {username} already exists")

    def set_password(self, username: str, password: str) -> None:
        """Replaces the password of an existing account."""
        if not self.exists(username):
            raise NotFound(f"user {username} does not exist")
        self._write(username, password)

    def ensure(self, username: str, password: str) -> None:
        """Creates the account or resets its password, unless it already has this one."""
        if not self.verify(username, password):
            self._write(_check_username(username), _check_password(password))

    def verify(self, username: str, password: str) -> bool:
        """Whether the password is right; an unknown user costs the same time as a known one."""
        record = self._read(username) if _USERNAME.match(username) else None
        if record is None:
            check_password_hash(_dummy_hash(), password)
            return False
        return check_password_hash(record.password_hash, password)

    def exists(self, username: str) -> bool:
        with storage_errors(f"reading user {username}"):
            return bool(self.client.hexists(self.key, username))

    def usernames(self) -> list[str]:
        with storage_errors("listing users"):
            return sorted(str(name) for name in self.client.hkeys(self.key))

    def remove(self, username: str) -> None:
        with storage_errors(f"removing user {username}"):
            removed = self.client.hdel(self.key, username)
        if not removed:
            raise NotFound(f"user {username} does not exist")

    def _write(self, username: str, password: str) -> None:
        record = self._record(username, _check_password(password))
        with storage_errors(f"writing user {username}"):
            self.client.hset(self.key, username, record.model_dump_json())

    def _record(self, username: str, password: str) -> UserRecord:
        return UserRecord(password_hash=generate_password_hash(password), created_at=time.time())

    def _read(self, username: str) -> UserRecord | None:
        with storage_errors(f"reading user {username}"):
            raw = self.client.hget(self.key, username)
        if raw is None:
            return None
        try:
            return UserRecord.model_validate_json(str(raw))
        except ValidationError as exc:
            raise CorruptRecord(f"user {username} in {self.key} does not parse") from exc


class TokenStore:
    """API bearer tokens with roles, stored by digest."""

    def __init__(self, client: redis.Redis, keys: KeySpace) -> None:
        self.client = client
        self.key = keys.tokens()

    def create(self, name: str, role: Role | str) -> str:
        """Stores a new token and returns its plain value: the only time it is seen."""
        if not name.strip() or len(name) > 100:
            raise InvalidInput("token name must be 1-100 characters")
        token = _TOKEN_PREFIX + secrets.token_urlsafe(32)
        record = TokenRecord(name=name.strip(), role=Role(role), created_at=time.time())
        with storage_errors(f"creating token {name}"):
            self.client.hset(self.key, token_digest(token), record.model_dump_json())
        return token

    def lookup(self, token: str) -> ApiToken | None:
        """The token's record, or None for a token that is unknown or revoked."""
        if not token.startswith(_TOKEN_PREFIX) or len(token) > 200:
            return None
        digest = token_digest(token)
        with storage_errors("reading an API token"):
            raw = self.client.hget(self.key, digest)
        return None if raw is None else self._parse(digest, str(raw))

    def tokens(self) -> list[ApiToken]:
        with storage_errors("listing API tokens"):
            raw: dict[str, str] = self.client.hgetall(self.key)  # type: ignore[assignment]
        tokens = [self._parse(digest, value) for digest, value in raw.items()]
        return sorted(tokens, key=lambda token: token.created_at)

    def revoke(self, token_id: str) -> None:
        """Revokes the token whose id (the digest prefix shown by `tokens`) is given."""
        valid = re.fullmatch(f"[0-9a-f]{{{_TOKEN_ID_LENGTH}}}", token_id) is not None
        with storage_errors(f"revoking API token {token_id}"):
            digests = [str(d) for d in self.client.hkeys(self.key) if str(d).startswith(token_id)]
            if not valid or not digests:
                raise NotFound(f"API token {token_id} does not exist")
            self.client.hdel(self.key, *digests)

    def _parse(self, digest: str, raw: str) -> ApiToken:
        try:
            record = TokenRecord.model_validate_json(raw)
        except ValidationError as exc:
            raise CorruptRecord(f"token {digest[:12]} in {self.key} does not parse") from exc
        return ApiToken(digest[:_TOKEN_ID_LENGTH], record.name, record.role, record.created_at)


class LoginThrottle:
    """Counts sign-in attempts per client in fixed one-minute windows (INCR + EXPIRE)."""

    def __init__(self, client: redis.Redis, keys: KeySpace, *, per_minute: int) -> None:
        self.client = client
        self.keys = keys
        self.per_minute = per_minute

    def attempt(self, client_id: str) -> bool:
        """Records one attempt; False when the client is over its limit for this minute."""
        key = self.keys.login_attempts(_client_key(client_id))
        with storage_errors("counting sign-in attempts"), self.client.pipeline() as pipe:
            pipe.incr(key)
            pipe.expire(key, _LOGIN_WINDOW_S, nx=True)
            count, _ = pipe.execute()
        return int(count) <= self.per_minute


def _client_key(client_id: str) -> str:
    """An address as a key part: IPv4/IPv6 characters only, anything else hashed."""
    if re.fullmatch(r"[0-9A-Fa-f.:]{1,45}", client_id):
        return client_id
    return hashlib.sha256(client_id.encode()).hexdigest()[:32]
