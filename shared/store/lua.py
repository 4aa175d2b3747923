"""Running Lua scripts in exactly one round trip, alone or inside a pipeline.

redis-py's Script checks SCRIPT EXISTS before a pipeline runs, an extra round
trip on every flush; here a pipeline sends EVAL with the body (Redis caches it by
digest) and a direct call uses EVALSHA, loading the script on NOSCRIPT.

Scripts of more than a few lines live in `.lua` files beside the code that runs them
(`shared/lua/`, `worker/lua/`, shipped as package data) and are read once, at import.
"""

from __future__ import annotations

import hashlib
from importlib import resources
from typing import Any

import redis
from redis.client import Pipeline

__all__ = ["LuaScript", "lua_source"]


def lua_source(package: str, name: str) -> str:
    """The text of `<package>/lua/<name>`."""
    return resources.files(package).joinpath("lua", name).read_text(encoding="utf-8")


class LuaScript:
    """A Lua script that runs on a client or is queued on a pipeline.

    Its parts are joined in order: the functions a script calls (`emit`, `history_write`)
    go before it, since Redis runs one chunk.
    """

    def __init__(self, *parts: str) -> None:
        self.body = "\n".join(parts)
        self.sha = hashlib.sha1(self.body.encode(), usedforsecurity=False).hexdigest()

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
