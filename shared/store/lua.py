"""Running Lua scripts in exactly one round trip, alone or inside a pipeline.

redis-py's Script checks SCRIPT EXISTS before a pipeline runs, an extra round
trip on every flush; here a pipeline sends EVAL with the body (Redis caches it by
digest), or EVALSHA for a caller that runs again what Redis answers NOSCRIPT, and a
direct call uses EVALSHA, loading the script on NOSCRIPT.

Every script is a `.lua` file beside the code that runs it (`shared/store/lua/`,
`worker/lua/`, shipped as package data), read once, at import. Its inputs are named in
Python, the one place their order is written: a script declares `keys` and `args`, and
the loader puts locals before the file's text (`<name>_key` for a key, `<group>_keys.<field>`
for a key named `<group>.<field>`, `<name>` for an argument, decoded when listed in
`decode`), so a script's body never reads `KEYS[i]` or `ARGV[i]`. The file's header repeats
the names for its reader (`-- KEYS[1] lease: ...`); tests/unit/test_lua_scripts.py checks
that header against the Python declaration.
"""

from __future__ import annotations

import functools
import hashlib
import json
import re
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from importlib import resources
from typing import Any, ClassVar

import redis
from redis.client import Pipeline
from redis.cluster import ClusterPipeline

from shared.metrics import series

__all__ = ["Declared", "LuaScript", "declaration_errors", "declared_inputs", "lua_source"]

_HEADER_LINE = re.compile(r"--\s*(KEYS|ARGV)\[([^\]]+)\]\s+([A-Za-z_][\w.]*)")
_POSITIONAL = re.compile(r"\b(KEYS|ARGV)\s*\[")


def lua_source(package: str, name: str, consts: Mapping[str, Sequence[str]] | None = None) -> str:
    """The text of `<package>/lua/<name>`, after `local <const> = {...}` for each constant."""
    text = resources.files(package).joinpath("lua", name).read_text(encoding="utf-8")
    return "\n".join([*_constants(consts or {}), text])


def _constants(consts: Mapping[str, Sequence[str]]) -> list[str]:
    return [
        f"local {name} = {{{', '.join(json.dumps(v) for v in values)}}}"
        for name, values in consts.items()
    ]


@dataclass(frozen=True)
class Declared:
    """A script's inputs as its file's header names them, in order."""

    keys: tuple[str, ...]
    args: tuple[str, ...]
    key_slots: tuple[str, ...]  # what the header writes inside KEYS[...], per key


def declared_inputs(source: str) -> Declared:
    """The `-- KEYS[i] name` and `-- ARGV[i] name` lines of the comment block a file opens with."""
    keys: list[str] = []
    args: list[str] = []
    slots: list[str] = []
    for line in source.splitlines():
        line = line.strip()
        if not line.startswith("--"):
            break
        match = _HEADER_LINE.match(line)
        if match is None:
            continue
        kind, slot, name = match.groups()
        if kind == "KEYS":
            keys.append(name)
            slots.append(slot.strip())
        else:
            args.append(name)
    return Declared(tuple(keys), tuple(args), tuple(slots))


def declaration_errors(
    source: str, keys: Sequence[str], args: Sequence[str], *, each: bool = False
) -> list[str]:
    """How a script's file and its Python declaration disagree (empty when they agree)."""
    declared = declared_inputs(source)
    errors = []
    if declared.keys != tuple(keys):
        errors.append(f"KEYS: the header names {list(declared.keys)}, Python {list(keys)}")
    if declared.args != tuple(args):
        errors.append(f"ARGV: the header names {list(declared.args)}, Python {list(args)}")
    if not each:
        for position, slot in enumerate(declared.key_slots, 1):
            if slot != str(position):
                errors.append(f"KEYS[{slot}] is key {position} in the header")
    body = [line for line in source.splitlines() if not line.strip().startswith("--")]
    for line in body:
        if _POSITIONAL.search(line.split("--")[0]):
            errors.append(f"reads an input by position, not by name: {line.strip()}")
    return errors


def _prelude(keys: Sequence[str], args: Sequence[str], decode: Sequence[str], each: bool) -> str:
    """Lua locals naming the script's inputs, from the Python declaration."""
    lines = []
    if each:
        fields = ", ".join(
            f"{name} = KEYS[{len(keys)} * i + {j}]" for j, name in enumerate(keys, 1)
        )
        lines.append(
            f"local each_keys = {{}}\nfor i = 0, #KEYS / {len(keys)} - 1 do "
            f"each_keys[i + 1] = {{{fields}}} end"
        )
    else:
        groups: dict[str, list[str]] = {}
        for position, name in enumerate(keys, 1):
            group, _, field = name.partition(".")
            if field:
                groups.setdefault(group, []).append(f"{field} = KEYS[{position}]")
            else:
                lines.append(f"local {name}_key = KEYS[{position}]")
        lines += [f"local {group}_keys = {{{', '.join(f)}}}" for group, f in groups.items()]
    for position, name in enumerate(args, 1):
        value = f"ARGV[{position}]"
        lines.append(f"local {name} = {f'cjson.decode({value})' if name in decode else value}")
    return "\n".join(lines)


class LuaScript:
    """A Lua script, `<package>/lua/<name>`, that runs on a client or is queued on a pipeline.

    `uses` are the function files it calls (`emit`, `history_write`), put before it, since
    Redis runs one chunk. With `each`, `keys` name one group repeated (`each_keys[i].<name>`).
    """

    loaded: ClassVar[list[LuaScript]] = []  # every script, for the declaration test

    def __init__(
        self,
        package: str,
        name: str,
        *,
        keys: Sequence[str] = (),
        args: Sequence[str] = (),
        decode: Sequence[str] = (),
        each: bool = False,
        uses: Sequence[str] = (),
        consts: Mapping[str, Sequence[str]] | None = None,
    ) -> None:
        self.path = f"{package.replace('.', '/')}/lua/{name}"
        self.source = lua_source(package, name)
        self.keys, self.args, self.each = tuple(keys), tuple(args), each
        prelude = _prelude(self.keys, self.args, decode, each)
        self.body = "\n".join([*_constants(consts or {}), *uses, prelude, self.source])
        self.sha = hashlib.sha1(self.body.encode(), usedforsecurity=False).hexdigest()
        self.name = name.removesuffix(".lua")
        LuaScript.loaded.append(self)

    def keys_from(self, named: Mapping[str, str]) -> list[str]:
        """The keys in the order this script declares them, picked by name from `named` (which
        may hold more: a history's six keys, say, of which a script takes some)."""
        return _ordered(self.path, "keys", self.keys, named, exact=False)

    def args_from(self, named: Mapping[str, Any]) -> list[Any]:
        """The arguments in the order this script declares them, from arguments by name."""
        return _ordered(self.path, "args", self.args, named, exact=True)

    def _check(self, keys: Sequence[str], args: Sequence[Any]) -> None:
        fits = len(keys) % len(self.keys) == 0 if self.each else len(keys) == len(self.keys)
        if not fits or len(args) != len(self.args):
            raise ValueError(
                f"{self.path} takes keys {self.keys} and args {self.args}; "
                f"given {len(keys)} keys and {len(args)} args"
            )

    def queue(self, pipe: Any, keys: list[str], args: list[Any]) -> Any:
        """Queues the script on any pipeline, sync or async (EVAL: no extra round trip)."""
        self._check(keys, args)
        # EVAL by name: a cluster pipeline's `eval` is something else
        return pipe.execute_command("EVAL", self.body, len(keys), *keys, *args)

    def queue_by_digest(self, pipe: Any, keys: list[str], args: list[Any]) -> Any:
        """Queues EVALSHA, the body left out of the round trip; its reply is NoScriptError
        when Redis lost the script (a restart), and then the caller runs it again alone."""
        self._check(keys, args)
        return pipe.execute_command("EVALSHA", self.sha, len(keys), *keys, *args)

    def __call__(self, client: redis.Redis | Pipeline, keys: list[str], args: list[Any]) -> Any:
        self._check(keys, args)
        if _is_pipeline(type(client)):
            return self.queue(client, keys, args)
        started = time.perf_counter()
        try:
            return client.evalsha(self.sha, len(keys), *keys, *args)
        except redis.exceptions.NoScriptError:
            return client.eval(self.body, len(keys), *keys, *args)
        finally:
            self.observe(time.perf_counter() - started)

    def observe(self, seconds: float) -> None:
        """Counts one run of the script that took `seconds` (scripts sharing a pipeline each
        count its round trip)."""
        # labels() at first use, not at import: the run's metric directory is known then
        series.child(series.REDIS_SCRIPT_DURATION, self.name).observe(seconds)


@functools.cache
def _is_pipeline(kind: type) -> bool:
    """Whether a client of this type is a pipeline, decided once per type (redis-py's classes
    derive from protocols, whose isinstance check runs Python code every time)."""
    return issubclass(kind, (Pipeline, ClusterPipeline))


def _ordered(
    path: str, kind: str, declared: Sequence[str], named: Mapping[str, Any], *, exact: bool
) -> list[Any]:
    """`named`'s values in `declared` order; a declared name missing (or, when `exact`, one
    given that is not declared) raises."""
    if not set(declared) <= set(named) or (exact and set(named) != set(declared)):
        raise ValueError(f"{path} declares {kind} {list(declared)}; given {sorted(named)}")
    return [named[name] for name in declared]
