"""`signoff user` and `signoff token` through the real entry point, against a real Redis."""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator

import pytest

from shared.local.embedded_redis import EmbeddedRedis
from shared.models.users import Role
from shared.store.users import TokenStore, UserStore
from tests.stack import run_cli, state_store

PASSWORD = "a-long-passphrase"


@pytest.fixture
def env(redis_server: EmbeddedRedis) -> dict[str, str]:
    return {
        "SIGNOFF_REDIS_URL": redis_server.url,
        "SIGNOFF_KEY_PREFIX": f"cli{uuid.uuid4().hex[:8]}",
    }


@pytest.fixture
def stores(env: dict[str, str]) -> Iterator[tuple[UserStore, TokenStore]]:
    client, keys = state_store(env["SIGNOFF_REDIS_URL"], env["SIGNOFF_KEY_PREFIX"])
    yield UserStore(client, keys), TokenStore(client, keys)
    client.close()


def test_passwd_disable_enable(env: dict[str, str], stores: tuple[UserStore, TokenStore]) -> None:
    users, _ = stores
    assert run_cli(env, "user", "add", "olivia", "--password", PASSWORD).returncode == 0
    generation = users.record("olivia").generation  # type: ignore[union-attr]
    session = users.sessions.start("olivia", generation=generation, lifetime_s=60)
    changed = run_cli(env, "user", "passwd", "olivia", "--password", "another-passphrase")
    assert changed.returncode == 0, changed.stderr
    assert "password of 'olivia' changed; 1 session(s) ended" in changed.stdout
    assert users.sessions.get(session) is None
    assert users.verify("olivia", "another-passphrase") and not users.verify("olivia", PASSWORD)
    disabled = run_cli(env, "user", "disable", "olivia")
    assert disabled.returncode == 0 and "disabled" in disabled.stdout
    assert users.info("olivia").disabled
    listed = run_cli(env, "user", "list")
    assert listed.stdout.startswith("olivia\tdisabled\t")
    assert run_cli(env, "user", "enable", "olivia").returncode == 0
    assert not users.info("olivia").disabled


@pytest.mark.parametrize("command", [["passwd", "--password", PASSWORD], ["disable"], ["enable"]])
def test_unknown_user_is_a_clear_error(env: dict[str, str], command: list[str]) -> None:
    result = run_cli(env, "user", command[0], "nobody", *command[1:])
    assert result.returncode == 2
    assert result.stderr.strip() == "error: user nobody does not exist"


def test_short_password_is_refused(
    env: dict[str, str], stores: tuple[UserStore, TokenStore]
) -> None:
    users, _ = stores
    users.add("olivia", PASSWORD)
    result = run_cli(env, "user", "passwd", "olivia", "--password", "short")
    assert result.returncode == 1 and "password must be at least 8 characters" in result.stderr
    assert users.verify("olivia", PASSWORD)


def test_token_create_list_revoke(
    env: dict[str, str], stores: tuple[UserStore, TokenStore]
) -> None:
    _, tokens = stores
    created = run_cli(
        env, "token", "create", "nightly", "--role", "submitter", "--expires-in", "30d"
    )
    assert created.returncode == 0, created.stderr
    plain = created.stdout.strip()
    found = tokens.lookup(plain)
    assert found is not None and found.role is Role.SUBMITTER
    assert found.expires_at == pytest.approx(time.time() + 30 * 86_400, abs=30)
    assert run_cli(env, "token", "create", "forever").returncode == 0
    listed = run_cli(env, "token", "list")
    assert listed.returncode == 0 and plain not in listed.stdout
    header, *rows = listed.stdout.splitlines()
    assert header.split("\t") == [
        "id",
        "name",
        "role",
        "created",
        "expires",
        "last used",
        "scopes",
    ]
    by_name = {row.split("\t")[1]: row.split("\t") for row in rows}
    assert by_name["nightly"][0] == found.token_id and by_name["nightly"][2] == "submitter"
    assert by_name["nightly"][4].endswith("UTC") and by_name["nightly"][5] != "never"
    assert by_name["forever"][4] == "never" and by_name["forever"][5] == "never"
    revoked = run_cli(env, "token", "revoke", found.token_id)
    assert revoked.returncode == 0 and "nightly" in revoked.stdout
    assert tokens.lookup(plain) is None
    again = run_cli(env, "token", "revoke", found.token_id)
    assert again.returncode == 2
    assert again.stderr.strip() == f"error: API token {found.token_id} does not exist"


@pytest.mark.parametrize("bad", ["30x", "0d", "-1d", "soon", "5000w"])
def test_token_expiry_must_be_a_duration(
    env: dict[str, str], stores: tuple[UserStore, TokenStore], bad: str
) -> None:
    result = run_cli(env, "token", "create", "x", "--expires-in", bad)
    assert result.returncode == 2 and "--expires-in" in result.stderr
    assert stores[1].tokens() == []
