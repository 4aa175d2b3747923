"""Sessions, disabled accounts, token expiry and last use, the per-user throttle (real Redis)."""

from __future__ import annotations

import logging
import time

import pytest
import redis

from shared.errors import InvalidInput, NotFound
from shared.models.users import Role
from shared.store.keys import KeySpace
from shared.store.login_throttle import LoginThrottle
from shared.store.sessions import SessionStore
from shared.store.users import TokenStore, UserStore

PASSWORD = "correct horse battery"


def test_sessions_start_end_and_expire(real_redis: redis.Redis, keys: KeySpace) -> None:
    sessions = SessionStore(real_redis, keys)
    first = sessions.start("ada", generation=3, lifetime_s=100)
    second = sessions.start("ada", generation=3, lifetime_s=100)
    other = sessions.start("bob", generation=0, lifetime_s=100)
    found = sessions.get(first)
    assert found is not None and (found.username, found.generation) == ("ada", 3)
    assert not any(first in key for key in real_redis.keys("*"))  # only its digest is stored
    assert 0 < real_redis.ttl(keys.user_sessions("ada")) <= 100
    sessions.end(first)
    assert sessions.get(first) is None and sessions.get(second) is not None
    assert sessions.count("ada") == 1
    assert sessions.end_all("ada") == 1
    assert sessions.get(second) is None and sessions.get(other) is not None
    assert not real_redis.exists(keys.user_sessions("ada"))
    sessions.end("never-was-a-session-id-but-long-enough-to-look-like-one")  # no error


@pytest.mark.parametrize("bad", ["", "short", "../../etc", "a" * 65 + "\n", 42])
def test_malformed_session_ids_name_nothing(
    real_redis: redis.Redis, keys: KeySpace, bad: object
) -> None:
    assert SessionStore(real_redis, keys).get(bad) is None  # type: ignore[arg-type]


@pytest.mark.one_redis  # finds the session's key with KEYS, one node's
def test_expired_sessions_leave_the_users_set(real_redis: redis.Redis, keys: KeySpace) -> None:
    sessions = SessionStore(real_redis, keys)
    gone = sessions.start("ada", generation=0, lifetime_s=100)
    real_redis.delete(*real_redis.keys(f"{keys.prefix}:session:*"))  # as if it expired
    live = sessions.start("ada", generation=0, lifetime_s=100)
    assert real_redis.scard(keys.user_sessions("ada")) == 1
    assert sessions.get(gone) is None and sessions.get(live) is not None


def test_password_change_and_disable_end_sessions(real_redis: redis.Redis, keys: KeySpace) -> None:
    users = UserStore(real_redis, keys)
    users.add("ada", PASSWORD)
    generation = users.record("ada").generation  # type: ignore[union-attr]
    session = users.sessions.start("ada", generation=generation, lifetime_s=60)
    assert users.set_password("ada", "another password", actor="test") == 1
    assert users.sessions.get(session) is None
    after = users.record("ada")
    assert after is not None and after.generation > generation and not after.disabled
    users.sessions.start("ada", generation=after.generation, lifetime_s=60)
    assert users.disable("ada", actor="test") == 1
    disabled = users.record("ada")
    assert disabled is not None and disabled.disabled and disabled.generation > after.generation
    assert users.verify("ada", "another password")  # the password stays right...
    authenticated = users.authenticate("ada", "another password")
    assert authenticated is not None and authenticated.disabled  # ...but the account is off
    assert [(u.username, u.disabled) for u in users.users()] == [("ada", True)]
    users.enable("ada", actor="test")
    assert users.info("ada").disabled is False
    users.sessions.start("ada", generation=users.record("ada").generation, lifetime_s=60)  # type: ignore[union-attr]
    users.remove("ada")
    assert users.sessions.count("ada") == 0


@pytest.mark.parametrize("change", ["set_password", "disable", "enable", "info"])
def test_unknown_users_are_named(real_redis: redis.Redis, keys: KeySpace, change: str) -> None:
    users = UserStore(real_redis, keys)
    with pytest.raises(NotFound, match="user nobody does not exist"):
        if change == "set_password":
            users.set_password("nobody", "long enough pw")
        elif change == "info":
            users.info("nobody")
        else:
            getattr(users, change)("nobody", actor="test")
    assert not users.exists("nobody")  # nothing was created on the way


def test_username_with_a_trailing_newline_is_refused(
    real_redis: redis.Redis, keys: KeySpace
) -> None:
    with pytest.raises(InvalidInput, match="username"):
        UserStore(real_redis, keys).add("ada\n", PASSWORD)


def test_ensure_keeps_a_disabled_account_disabled(real_redis: redis.Redis, keys: KeySpace) -> None:
    users = UserStore(real_redis, keys)
    users.ensure("admin", PASSWORD)
    users.disable("admin", actor="test")
    users.ensure("admin", "the admin password was changed")
    assert users.info("admin").disabled
    assert users.verify("admin", "the admin password was changed")


def test_disable_and_revoke_are_logged_with_the_actor(
    real_redis: redis.Redis, keys: KeySpace, caplog: pytest.LogCaptureFixture
) -> None:
    users, tokens = UserStore(real_redis, keys), TokenStore(real_redis, keys)
    users.add("ada", PASSWORD)
    with caplog.at_level(logging.INFO, logger="shared.store.users"):
        users.disable("ada", actor="session root")
        issued = tokens.issue("ci", Role.VIEWER, actor="session root")
        tokens.revoke(issued.info.token_id, actor="token deployer")
    assert "user ada disabled by session root" in caplog.text
    assert f"API token {issued.info.token_id} (ci) revoked by token deployer" in caplog.text
    assert issued.token not in caplog.text and issued.token not in repr(issued)


def test_tokens_expire(real_redis: redis.Redis, keys: KeySpace) -> None:
    tokens = TokenStore(real_redis, keys)
    issued = tokens.issue("nightly", "submitter", expires_in_s=30 * 86_400)
    assert issued.info.expires_at == pytest.approx(time.time() + 30 * 86_400, abs=5)
    found = tokens.lookup(issued.token)
    assert found is not None and not found.expired()
    assert found.expired(now=issued.info.expires_at)  # type: ignore[arg-type]
    forever = tokens.lookup(tokens.create("forever", "viewer"))
    assert forever is not None and forever.expires_at is None and not forever.expired(now=1e12)


@pytest.mark.parametrize(
    ("name", "expires_in_s", "says"),
    [
        ("ok", 0, "expires_in_s"),
        ("ok", 11 * 365 * 86_400, "expires_in_s"),
        ("tab\tname", None, "control characters"),
        ("line\nbreak", None, "control characters"),
        ("   ", None, "1-100 characters"),
    ],
)
def test_bad_tokens_are_refused(
    real_redis: redis.Redis, keys: KeySpace, name: str, expires_in_s: int | None, says: str
) -> None:
    tokens = TokenStore(real_redis, keys)
    with pytest.raises(InvalidInput, match=says):
        tokens.issue(name, Role.VIEWER, expires_in_s=expires_in_s)
    assert tokens.tokens() == []


def test_last_use_is_noted_at_most_once_a_minute(real_redis: redis.Redis, keys: KeySpace) -> None:
    tokens = TokenStore(real_redis, keys)
    issued = tokens.issue("ci", Role.VIEWER)
    assert tokens.tokens()[0].last_used_at is None
    tokens.lookup(issued.token)
    first = tokens.tokens()[0].last_used_at
    assert first == pytest.approx(time.time(), abs=5)
    tokens.lookup(issued.token)
    assert tokens.tokens()[0].last_used_at == first  # no write per request
    revoked = tokens.revoke(issued.info.token_id)
    assert revoked.name == "ci"
    assert not real_redis.exists(keys.tokens_used())
    with pytest.raises(NotFound, match=f"API token {issued.info.token_id} does not exist"):
        tokens.revoke(issued.info.token_id)


def test_throttle_counts_per_username(real_redis: redis.Redis, keys: KeySpace) -> None:
    throttle = LoginThrottle(real_redis, keys, per_minute=100, per_user_per_minute=2)
    assert [throttle.attempt_as("ada") for _ in range(3)] == [True, True, False]
    assert throttle.attempt_as("bob")
    assert 0 < real_redis.ttl(f"{keys.prefix}:login-window-user:ada") <= 60
    throttle.attempt_as("odd name\r\nwith: {braces}")
    assert not any(
        set(key) & set(" \r\n{}") for key in real_redis.keys(f"{keys.prefix}:login-window-user:*")
    )
