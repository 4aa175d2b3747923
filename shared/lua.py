"""Running Lua scripts in exactly one round trip, alone or inside a pipeline.

redis-py's Script checks SCRIPT EXISTS before a pipeline runs, an extra round
trip on every flush; here a pipeline sends EVAL with the body (Redis caches it by
digest) and a direct call uses EVALSHA, loading the script on NOSCRIPT.
"""

from __future__ import annotations

import hashlib
from typing import Any

import redis
from redis.client import Pipeline

__all__ = ["LuaScript"]


class LuaScript:
    """A Lua script that runs on a client or is queued on a pipeline."""

    def __init__(self, body: str) -> None:
        self.body = body
        self.sha = hashlib.sha1(body.encode(), usedforsecurity=False).hexdigest()

    def queue(self, pipe: Any, keys: list[str], args: list[Any]) -> Any:
        """Queues the script on any pipeline, sync or async (EVAL: no extra round trip)."""
        return pipe.eval(self.body, len(keys), *keys, *args)

    def __call__(self, client: redis.Redis | Pipeline, keys: list[str], args: list[Any]) -> Any:
        if isinstance(client, Pipeline):
            return client.eval(self.body, len(keys), *keys, *args)
        try:
            return client.evalsha(self.sha, len(keys), *keys, *args)
        except redis.exceptions.NoScriptError:
            return client.eval(self.body, len(keys), *keys, *args)
