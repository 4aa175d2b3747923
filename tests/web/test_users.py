"""shared.store.users: password hashes, hashed tokens with roles, sign-in throttling (real Redis)"""

from __future__ import annotations

import hashlib

import pytest
import redis

from shared.errors import Conflict, InvalidInput, NotFound
from shared.models.users import Role
from shared.store.keys import KeySpace
from shared.store.login_throttle import LoginThrottle
from shared.store.users import TokenStore, UserStore


def test_passwords_are_stored_hashed(real_redis: redis.Redis, keys: KeySpace) -> None:
    users = UserStore(real_redis, keys)
    users.add("ada", "correct horse battery")
    stored = str(real_redis.hget(f"{keys.prefix}:users", "ada"))
    assert "correct horse battery" not in stored and "scrypt:" in stored
    assert users.verify("ada", "correct horse battery")
    assert not users.verify("ada", "wrong password")
    assert not users.verify("bob", "correct horse battery")
    assert not users.verify("../etc", "x")
    with pytest.raises(Conflict):
        users.add("ada", "another password")
    users.set_password("ada", "new password 123")
    assert users.verify("ada", "new password 123") and not users.verify(
        "ada", "correct horse battery"
    )
    assert users.usernames() == ["ada"]
    users.remove("ada")
    assert not users.exists("ada")
    with pytest.raises(NotFound):
        users.set_password("ada", "whatever123")


@pytest.mark.parametrize(("username", "password"), [("has space", "long enough"), ("ok", "short")])
def test_bad_accounts_are_refused(
    real_redis: redis.Redis, keys: KeySpace, username: str, password: str
) -> None:
    with pytest.raises(InvalidInput):
        UserStore(real_redis, keys).add(username, password)


def test_ensure_creates_or_resets(real_redis: redis.Redis, keys: KeySpace) -> None:
    users = UserStore(real_redis, keys)
    users.ensure("admin", "first password")
    stored = real_redis.hget(f"{keys.prefix}:users", "admin")
    users.ensure("admin", "first password")
    assert real_redis.hget(f"{keys.prefix}:users", "admin") == stored  # unchanged: no rehash
    users.ensure("admin", "second password")
    assert users.verify("admin", "second password")


def test_tokens_are_stored_as_digests(real_redis: redis.Redis, keys: KeySpace) -> None:
    tokens = TokenStore(real_redis, keys)
    plain = tokens.create("ci pipeline", Role.SUBMITTER)
    digest = hashlib.sha256(plain.encode()).hexdigest()
    assert real_redis.hkeys(f"{keys.prefix}:tokens") == [digest]
    assert plain not in str(real_redis.hgetall(f"{keys.prefix}:tokens"))
    found = tokens.lookup(plain)
    assert found is not None and (found.name, found.role) == ("ci pipeline", Role.SUBMITTER)
    assert tokens.lookup(plain + "x") is None and tokens.lookup("not-a-token") is None
    (listed,) = tokens.tokens()
    assert listed.token_id == digest[:12]
    with pytest.raises(NotFound):
        tokens.revoke("0" * 12)
    tokens.revoke(listed.token_id)
    assert tokens.lookup(plain) is None


def test_roles_include_the_ones_below() -> None:
    assert Role.OPERATOR.allows(Role.SUBMITTER) and Role.OPERATOR.allows(Role.VIEWER)
    assert Role.SUBMITTER.allows(Role.VIEWER) and not Role.SUBMITTER.allows(Role.OPERATOR)
    assert not Role.VIEWER.allows(Role.SUBMITTER)


def test_throttle_counts_per_client_and_expires(real_redis: redis.Redis, keys: KeySpace) -> None:
    throttle = LoginThrottle(real_redis, keys, per_minute=2)
    assert [throttle.attempt("10.0.0.1") for _ in range(3)] == [True, True, False]
    assert throttle.attempt("2001:db8::1")
    assert 0 < real_redis.ttl(f"{keys.prefix}:login-window:10.0.0.1") <= 60
    throttle.attempt("weird client id with spaces")
    assert not any(" " in k for k in real_redis.keys(f"{keys.prefix}:login-window:*"))
