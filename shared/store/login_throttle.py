"""Sign-in throttling: attempts in a sliding one-minute window, per address and per username.

Each key keeps the times of the attempts it allowed in the last minute (a sorted set of
at most the limit's size); an attempt is allowed while fewer than the limit are in the
window ending now. A fixed window (a counter reset each minute) let whoever started just
before its end make twice the limit in a few seconds; a sliding one never allows more
than the limit in any minute. The time comes from the caller's clock, so tests move it.
"""

from __future__ import annotations

import hashlib
import itertools
import re
import time
from collections.abc import Callable

import redis

from shared.store.connection import storage_errors
from shared.store.keys import KeySpace
from shared.store.lua import LuaScript

__all__ = ["LOGIN_WINDOW_S", "LoginThrottle"]

LOGIN_WINDOW_S = 60
_USERNAME = re.compile(r"[A-Za-z0-9_.@-]{1,64}")

_ATTEMPT = LuaScript(
    "shared.store",
    "login_attempt.lua",
    keys=["window"],
    args=["now", "window_ms", "limit", "attempt"],
)


class LoginThrottle:
    """Allows at most `per_minute` sign-in attempts from one address in any 60 s, and
    `per_user_per_minute` naming one username from any address (so one account cannot be
    guessed at from many addresses at once), known or not."""

    def __init__(
        self,
        client: redis.Redis,
        keys: KeySpace,
        *,
        per_minute: int,
        per_user_per_minute: int | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.client = client
        self.keys = keys
        self.per_minute = per_minute
        self.per_user_per_minute = per_user_per_minute or per_minute
        self.clock = clock
        self._ids = itertools.count()

    def attempt(self, client_id: str) -> bool:
        """Records one attempt; False when the address has used its limit in the last minute."""
        return self._attempt(self.keys.login_attempts(_client_key(client_id)), self.per_minute)

    def attempt_as(self, username: str) -> bool:
        """Records one attempt naming `username` (known or not); False when over its limit."""
        key = self.keys.login_attempts_as(_username_key(username))
        return self._attempt(key, self.per_user_per_minute)

    def _attempt(self, key: str, limit: int) -> bool:
        now_ms = int(self.clock() * 1000)
        member = f"{now_ms}-{next(self._ids)}-{id(self):x}"
        with storage_errors("counting sign-in attempts"):
            allowed = _ATTEMPT(self.client, [key], [now_ms, LOGIN_WINDOW_S * 1000, limit, member])
        return bool(allowed)


def _client_key(client_id: str) -> str:
    """An address as a key part: IPv4/IPv6 characters only, anything else hashed."""
    if re.fullmatch(r"[0-9A-Fa-f.:]{1,45}", client_id):
        return client_id
    return hashlib.sha256(client_id.encode()).hexdigest()[:32]


def _username_key(username: str) -> str:
    """A username as a key part: a valid one as it is, anything else hashed."""
    if _USERNAME.fullmatch(username):
        return username
    return "#" + hashlib.sha256(username.encode()).hexdigest()[:32]
