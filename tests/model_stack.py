"""A module's stack whose openai and ollama providers point at a stand-in `WireServer`."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest

from shared.client import Client
from shared.local.embedded_redis import EmbeddedRedis
from shared.settings import Settings
from tests.wire_servers import WireServer


@pytest.fixture(scope="module")
def model_server() -> Iterator[WireServer]:
    with WireServer() as server:
        yield server


def stand_in_env(redis_server: EmbeddedRedis, server: WireServer, **extra: str) -> dict[str, str]:
    """The stack's environment: its own key prefix, both HTTP providers on `server`, no retries."""
    return {
        "SIGNOFF_REDIS_URL": redis_server.url,
        "SIGNOFF_KEY_PREFIX": f"st{uuid.uuid4().hex[:8]}",
        "SIGNOFF_OPENAI_BASE_URL": f"{server.url}/v1",
        "SIGNOFF_OLLAMA_BASE_URL": server.url,
        "SIGNOFF_PROVIDER_MAX_RETRIES": "0",
        **extra,
    }


def stack_client(stack_env: dict[str, str], workers: object, **settings: object) -> Client:
    """A client on the stack's Redis and prefix (`workers` only says the workers run)."""
    del workers
    return Client(
        Settings(
            redis_url=stack_env["SIGNOFF_REDIS_URL"],
            key_prefix=stack_env["SIGNOFF_KEY_PREFIX"],
            **settings,  # type: ignore[arg-type]
        )
    )
