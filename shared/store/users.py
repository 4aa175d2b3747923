"""Who may use Signoff: operator accounts and API tokens with roles.

Used by the web UI (sign-in, bearer tokens, the token and user API) and by the CLI
(`signoff user`, `signoff token`). Passwords are stored as werkzeug password hashes
(scrypt); a token is stored as its SHA-256 digest, and its plain value is returned
once, when it is created. Changing a password, disabling or removing an account
ends every session of it (`shared.store.sessions`); revoking a token or passing its
expiry ends it at the next request.
"""

from __future__ import annotations

import functools
import hashlib
import logging
import re
import secrets
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

import redis
from pydantic import BaseModel, ValidationError
from werkzeug.security import check_password_hash, generate_password_hash

from shared.errors import Conflict, CorruptRecord, InvalidInput, NotFound
from shared.models.owners import OWNER_SEPARATOR, is_internal_owner
from shared.models.users import Role, check_scopes, scope_text
from shared.store.connection import storage_errors
from shared.store.keys import KeySpace
from shared.store.sessions import SessionStore

__all__ = [
    "MAX_TOKEN_LIFETIME_S",
    "MAX_TOKEN_NAME",
    "TOKEN_NAME_PATTERN",
    "ApiToken",
    "IssuedToken",
    "TokenRecord",
    "TokenStore",
    "UserInfo",
    "UserRecord",
    "UserStore",
    "checked_access",
]

log = logging.getLogger(__name__)

_USERNAME = re.compile(r"[A-Za-z0-9_.@-]{1,64}")
_MIN_PASSWORD = 8
_TOKEN_PREFIX = "so_"  # noqa: S105 (a marker, not a secret)
_TOKEN_ID_LENGTH = 12
_USE_NOTED_EVERY_S = 60  # a token's "last used" is written at most this often
MAX_TOKEN_LIFETIME_S = 10 * 365 * 86_400
MAX_TOKEN_NAME = 100

# Control (Cc) and invisible formatting (Cf) characters of Unicode 14 (a test checks them
# against `unicodedata`); the astral ones are written as themselves, which every regex
# engine reads (escapes for them differ between Python, Rust and ECMA-262).
_INVISIBLE = (
    r"\x00-\x1f\x7f-\x9f\xad\u0600-\u0605\u061c\u06dd\u070f\u0890\u0891\u08e2\u180e"
    r"\u200b-\u200f\u202a-\u202e\u2060-\u2064\u2066-\u206f\ufeff\ufff9-\ufffb"
    "\U000110bd\U000110cd\U00013430-\U00013438\U0001bca0-\U0001bca3\U0001d173-\U0001d17a"
    "\U000e0001\U000e0020-\U000e007f"
)
_SPACE = r"\t-\r\x1c-\x20\x85\xa0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000"  # str.isspace
# A token name: not only whitespace, no character in it invisible, and not the internal
# owners' separator (no token may act as a batch, trigger or schedule). The API declares it.
_NOT_IN_NAME = _INVISIBLE + OWNER_SEPARATOR
TOKEN_NAME_PATTERN = f"^[^{_NOT_IN_NAME}]*[^{_NOT_IN_NAME}{_SPACE}][^{_NOT_IN_NAME}]*$"
_TOKEN_NAME = re.compile(TOKEN_NAME_PATTERN[1:-1])


class UserRecord(BaseModel):
    """An account as stored; accounts from before roles are operators."""

    password_hash: str
    created_at: float
    disabled: bool = False
    generation: int = 0  # moves on whenever every session of the account must end
    role: Role = Role.OPERATOR
    scopes: list[str] = []  # an approver's (`shared.approvers`); none means every approval
    slack_user: str | None = None  # the Slack user id that acts as this account in Slack


@dataclass(frozen=True)
class UserInfo:
    """An account as callers see it: never the password hash."""

    username: str
    created_at: float
    disabled: bool
    role: Role = Role.OPERATOR
    scopes: tuple[str, ...] = ()


class TokenRecord(BaseModel):
    """An API token as stored: never the token itself."""

    name: str
    role: Role
    created_at: float
    expires_at: float | None = None
    scopes: list[str] = []


@dataclass(frozen=True)
class ApiToken:
    """A token as callers see it; `token_id` (digest prefix) names it for revocation."""

    token_id: str
    name: str
    role: Role
    created_at: float
    expires_at: float | None = None
    last_used_at: float | None = None
    scopes: tuple[str, ...] = ()

    def expired(self, now: float | None = None) -> bool:
        """Whether the token is past its expiry (a token without one never expires)."""
        moment = time.time() if now is None else now
        return self.expires_at is not None and moment >= self.expires_at


@dataclass(frozen=True)
class IssuedToken:
    """A token just created: its plain value (shown this once) and its record."""

    token: str = field(repr=False)
    info: ApiToken


def _check_username(username: str) -> str:
    if not isinstance(username, str) or not _USERNAME.fullmatch(username):
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


def checked_access(role: Role | str, scopes: Iterable[str]) -> tuple[Role, tuple[str, ...]]:
    """The role and its scopes; scopes narrow an approver, so only an approver has them."""
    try:
        chosen = Role(role)
    except ValueError:
        names = ", ".join(r.value for r in Role)
        raise InvalidInput(f"role: {str(role)[:30]!r} is not one of {names}") from None
    found = check_scopes(scopes)
    if found and chosen is not Role.APPROVER:
        raise InvalidInput(
            f"scope: only an approver has scopes (they narrow what it may resolve); "
            f"a {chosen.value} has none"
        )
    return chosen, found


def token_digest(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


class UserStore:
    """Operator accounts: usernames with password hashes, and whether they may sign in."""

    def __init__(self, client: redis.Redis, keys: KeySpace) -> None:
        self.client = client
        self.key = keys.users()
        self.sessions = SessionStore(client, keys)

    def add(
        self,
        username: str,
        password: str,
        *,
        role: Role | str = Role.OPERATOR,
        scopes: Iterable[str] = (),
    ) -> None:
        """Creates an account; Conflict when the username is taken."""
        chosen, found = checked_access(role, scopes)
        record = self._record(_check_username(username), _check_password(password))
        record = record.model_copy(update={"role": chosen, "scopes": list(found)})
        with storage_errors(f"adding user {username}"):
            created = self.client.hsetnx(self.key, username, record.model_dump_json())
        if not created:
            raise Conflict(f"user {username} already exists")

    def set_password(self, username: str, password: str, *, actor: str = "unknown") -> int:
        """Replaces the password and ends every session; returns how many were live."""
        hashed = generate_password_hash(_check_password(password))
        self._update(
            username,
            lambda r: r.model_copy(
                update={"password_hash": hashed, "generation": r.generation + 1}
            ),
        )
        ended = self.sessions.end_all(username)
        log.info("password of user %s changed by %s; %d sessions ended", username, actor, ended)
        return ended

    def ensure(
        self,
        username: str,
        password: str,
        *,
        role: Role | str | None = None,
        scopes: Iterable[str] | None = None,
        actor: str = "the admin password setting",
    ) -> None:
        """Creates the account or resets its password, unless it already has this one; sets
        its role and scopes when given (a new account is an operator by default).

        A disabled account stays disabled: a restart with the admin password set
        does not undo `signoff user disable`.
        """
        if role is not None or scopes is not None:
            checked_access(role or Role.OPERATOR, scopes or ())
        if not self.verify(username, password):
            try:
                self.add(username, password, role=role or Role.OPERATOR, scopes=scopes or ())
                return
            except Conflict:
                self.set_password(username, password, actor=actor)
        if role is not None or scopes is not None:
            self.set_access(username, role or Role.OPERATOR, scopes or (), actor=actor)

    def set_access(
        self, username: str, role: Role | str, scopes: Iterable[str], *, actor: str
    ) -> None:
        """Gives the account a role and scopes; its sessions have them from their next request."""
        chosen, found = checked_access(role, scopes)
        self._update(
            username, lambda r: r.model_copy(update={"role": chosen, "scopes": list(found)})
        )
        log.info("user %s is %s (%s), set by %s", username, chosen.value, scope_text(found), actor)

    def disable(self, username: str, *, actor: str) -> int:
        """Refuses the account's sign-ins and ends its sessions; returns how many were live."""
        self._update(
            username,
            lambda r: r.model_copy(update={"disabled": True, "generation": r.generation + 1}),
        )
        ended = self.sessions.end_all(username)
        log.info("user %s disabled by %s; %d sessions ended", username, actor, ended)
        return ended

    def enable(self, username: str, *, actor: str) -> None:
        """Lets a disabled account sign in again."""
        self._update(username, lambda r: r.model_copy(update={"disabled": False}))
        log.info("user %s enabled by %s", username, actor)

    def authenticate(self, username: str, password: str) -> UserRecord | None:
        """The account if the password is right (disabled or not); None otherwise.

        An unknown user costs the same time as a known one.
        """
        record = self.record(username) if _USERNAME.fullmatch(username) else None
        if record is None:
            check_password_hash(_dummy_hash(), password)
            return None
        return record if check_password_hash(record.password_hash, password) else None

    def verify(self, username: str, password: str) -> bool:
        """Whether the password is right (whether or not the account is disabled)."""
        return self.authenticate(username, password) is not None

    def set_slack_user(self, username: str, slack_user: str, *, actor: str) -> None:
        """Maps a Slack user id to the account: its Allow and Deny in Slack are this account's."""
        if not re.fullmatch(r"[A-Z0-9]{2,32}", slack_user):
            raise InvalidInput(f"slack user id {slack_user[:40]!r} must look like U012ABCDEF")
        self._update(username, lambda r: r.model_copy(update={"slack_user": slack_user}))
        log.info("user %s is Slack user %s, set by %s", username, slack_user, actor)

    def by_slack_user(self, slack_user: str) -> tuple[str, UserRecord] | None:
        """The enabled account a Slack user id is mapped to, or None."""
        with storage_errors("listing users"):
            raw: dict[str, str] = self.client.hgetall(self.key)  # type: ignore[assignment]
        for name, doc in raw.items():
            record = self._parse(name, doc)
            if record.slack_user == slack_user and not record.disabled:
                return name, record
        return None

    def exists(self, username: str) -> bool:
        with storage_errors(f"reading user {username}"):
            return bool(self.client.hexists(self.key, username))

    def record(self, username: str) -> UserRecord | None:
        """The stored account, or None when there is none."""
        with storage_errors(f"reading user {username}"):
            raw = self.client.hget(self.key, username)
        return None if raw is None else self._parse(username, str(raw))

    def info(self, username: str) -> UserInfo:
        """The account as callers see it; NotFound when there is none."""
        record = self.record(username)
        if record is None:
            raise NotFound(f"user {username} does not exist")
        return _info(username, record)

    def usernames(self) -> list[str]:
        with storage_errors("listing users"):
            return sorted(str(name) for name in self.client.hkeys(self.key))

    def users(self) -> list[UserInfo]:
        """Every account, by name."""
        with storage_errors("listing users"):
            raw: dict[str, str] = self.client.hgetall(self.key)  # type: ignore[assignment]
        infos = []
        for name in sorted(raw):
            infos.append(_info(name, self._parse(name, raw[name])))
        return infos

    def remove(self, username: str) -> None:
        """Deletes the account and ends its sessions."""
        with storage_errors(f"removing user {username}"):
            removed = self.client.hdel(self.key, username)
        if not removed:
            raise NotFound(f"user {username} does not exist")
        self.sessions.end_all(username)

    def _update(self, username: str, change: Callable[[UserRecord], UserRecord]) -> None:
        """Rewrites one account under WATCH, so concurrent changes are not lost."""

        def apply(pipe: redis.client.Pipeline) -> None:
            raw = pipe.hget(self.key, username)
            if raw is None:
                raise NotFound(f"user {username} does not exist")
            updated = change(self._parse(username, str(raw)))
            pipe.multi()
            pipe.hset(self.key, username, updated.model_dump_json())

        with storage_errors(f"updating user {username}"):
            self.client.transaction(apply, self.key)

    def _record(self, username: str, password: str) -> UserRecord:
        return UserRecord(password_hash=generate_password_hash(password), created_at=time.time())

    def _parse(self, username: str, raw: str) -> UserRecord:
        try:
            return UserRecord.model_validate_json(raw)
        except ValidationError as exc:
            raise CorruptRecord(f"user {username} in {self.key} does not parse") from exc


class TokenStore:
    """API bearer tokens with roles and optional expiry, stored by digest."""

    def __init__(self, client: redis.Redis, keys: KeySpace) -> None:
        self.client = client
        self.key = keys.tokens()
        self.used_key = keys.tokens_used()

    def create(self, name: str, role: Role | str) -> str:
        """Stores a new token that never expires and returns its plain value."""
        return self.issue(name, role).token

    def issue(
        self,
        name: str,
        role: Role | str,
        *,
        expires_in_s: int | None = None,
        actor: str = "unknown",
        scopes: Iterable[str] = (),
    ) -> IssuedToken:
        """Stores a new token; its plain value is in the answer, the only time it is seen."""
        chosen, found = checked_access(role, scopes)
        if not name.strip() or len(name) > MAX_TOKEN_NAME:
            raise InvalidInput(f"token name must be 1-{MAX_TOKEN_NAME} characters")
        if not _TOKEN_NAME.fullmatch(name):
            raise InvalidInput(
                f"token name {name!r} must not contain {OWNER_SEPARATOR!r} (it marks internal "
                "owners such as batch:<id>), control characters or invisible formatting characters"
            )
        if expires_in_s is not None and not 0 < expires_in_s <= MAX_TOKEN_LIFETIME_S:
            raise InvalidInput(
                f"token expires_in_s must be 1-{MAX_TOKEN_LIFETIME_S} seconds, got {expires_in_s}"
            )
        token = _TOKEN_PREFIX + secrets.token_urlsafe(32)
        now = time.time()
        expires_at = None if expires_in_s is None else now + expires_in_s
        record = TokenRecord(
            name=name.strip(),
            role=chosen,
            created_at=now,
            expires_at=expires_at,
            scopes=list(found),
        )
        digest = token_digest(token)
        with storage_errors(f"creating token {name}"):
            self.client.hset(self.key, digest, record.model_dump_json())
        info = self._parse(digest, record.model_dump_json(), None)
        log.info(
            "API token %s (%s, %s) created by %s", info.token_id, info.name, info.role.value, actor
        )
        return IssuedToken(token, info)

    def lookup(self, token: str) -> ApiToken | None:
        """The token's record (expired or not), or None when unknown or revoked.

        Notes when the token was used, at most once a minute, so a listing can say.
        """
        if not token.startswith(_TOKEN_PREFIX) or len(token) > 200:
            return None
        digest = token_digest(token)
        with (
            storage_errors("reading an API token"),
            self.client.pipeline(transaction=False) as pipe,
        ):
            pipe.hget(self.key, digest)
            pipe.hget(self.used_key, digest)
            raw, used = pipe.execute()
        if raw is None:
            return None
        found = self._parse(digest, str(raw), used)
        self._note_use(digest, found)
        return found

    def tokens(self) -> list[ApiToken]:
        """Every token, oldest first, with when each was last used."""
        with storage_errors("listing API tokens"), self.client.pipeline(transaction=False) as pipe:
            pipe.hgetall(self.key)
            pipe.hgetall(self.used_key)
            raw, used = pipe.execute()
        tokens = [self._parse(digest, value, used.get(digest)) for digest, value in raw.items()]
        return sorted(tokens, key=lambda token: token.created_at)

    def revoke(self, token_id: str, *, actor: str = "unknown") -> ApiToken:
        """Revokes the token whose id (the digest prefix shown by `tokens`) is given."""
        valid = re.fullmatch(f"[0-9a-f]{{{_TOKEN_ID_LENGTH}}}", token_id) is not None
        with storage_errors(f"revoking API token {token_id}"):
            digests = [str(d) for d in self.client.hkeys(self.key) if str(d).startswith(token_id)]
            if not valid or not digests:
                raise NotFound(f"API token {token_id} does not exist")
            raw = self.client.hget(self.key, digests[0])
            with self.client.pipeline(transaction=False) as pipe:
                pipe.hdel(self.key, *digests)
                pipe.hdel(self.used_key, *digests)
                pipe.execute()
        revoked = self._parse(digests[0], str(raw), None)
        log.info("API token %s (%s) revoked by %s", token_id, revoked.name, actor)
        return revoked

    def rename_owner_lookalikes(self) -> list[tuple[ApiToken, str]]:
        """Renames tokens named like an internal owner (made before names were restricted).

        Each `:` becomes `-`; returns each renamed token (as it was) with its new name.
        """
        with storage_errors("listing API tokens"):
            raw: dict[str, str] = self.client.hgetall(self.key)  # type: ignore[assignment]
        renamed: list[tuple[ApiToken, str]] = []
        for digest, value in raw.items():
            token = self._parse(digest, value, None)
            if is_internal_owner(token.name):
                new_name = token.name.replace(OWNER_SEPARATOR, "-")
                record = TokenRecord.model_validate_json(value).model_copy(
                    update={"name": new_name}
                )
                with storage_errors(f"renaming API token {token.token_id}"):
                    self.client.hset(self.key, digest, record.model_dump_json())
                renamed.append((token, new_name))
        return renamed

    def _note_use(self, digest: str, found: ApiToken) -> None:
        now = time.time()
        if found.expired(now):
            return
        if found.last_used_at is None or now - found.last_used_at >= _USE_NOTED_EVERY_S:
            with storage_errors("noting an API token's use"):
                self.client.hset(self.used_key, digest, repr(now))

    def _parse(self, digest: str, raw: str, used: str | None) -> ApiToken:
        try:
            record = TokenRecord.model_validate_json(raw)
        except ValidationError as exc:
            raise CorruptRecord(f"token {digest[:12]} in {self.key} does not parse") from exc
        return ApiToken(
            digest[:_TOKEN_ID_LENGTH],
            record.name,
            record.role,
            record.created_at,
            record.expires_at,
            _as_time(used),
            tuple(record.scopes),
        )


def _info(username: str, record: UserRecord) -> UserInfo:
    return UserInfo(username, record.created_at, record.disabled, record.role, tuple(record.scopes))


def _as_time(raw: str | None) -> float | None:
    try:
        return None if raw is None else float(raw)
    except ValueError:
        return None
