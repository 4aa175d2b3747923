"""Every Lua script is a named file whose header and Python declaration agree."""

from __future__ import annotations

import importlib
import re
from pathlib import Path

import pytest
import redis

from shared.store.lua import LuaScript, declaration_errors, declared_inputs

ROOT = Path(__file__).resolve().parents[2]
LUA_DIRS = (ROOT / "shared" / "store" / "lua", ROOT / "worker" / "lua")
_LIBRARY = re.compile(r"^local function (\w+)\(", re.MULTILINE)


def _modules_with_scripts() -> list[str]:
    """Every project module that builds a LuaScript (found by text, then imported)."""
    found = []
    for package in ("shared", "worker", "webui", "cli"):
        for path in (ROOT / package).rglob("*.py"):
            if "LuaScript(" in path.read_text() and path.name != "lua.py":
                found.append(".".join(path.relative_to(ROOT).with_suffix("").parts))
    return sorted(found)


def _scripts() -> list[LuaScript]:
    for module in _modules_with_scripts():
        importlib.import_module(module)
    return list(LuaScript.loaded)


def test_each_script_header_names_the_keys_and_args_its_caller_declares() -> None:
    scripts = _scripts()
    assert len(scripts) >= 25
    problems = {
        script.path: errors
        for script in scripts
        if (errors := declaration_errors(script.source, script.keys, script.args, each=script.each))
    }
    assert problems == {}


def test_every_lua_file_is_a_declared_script_or_a_function_library() -> None:
    scripts = {script.path for script in _scripts()}
    for directory in LUA_DIRS:
        for path in directory.glob("*.lua"):
            relative = path.relative_to(ROOT).as_posix()
            if relative in scripts:
                continue
            text = path.read_text()
            # A library: one function for scripts to call, reading no input itself.
            assert len(_LIBRARY.findall(text)) == 1, relative
            assert declared_inputs(text).keys == () and "KEYS[" not in text, relative


def test_no_script_is_left_in_a_python_string() -> None:
    for package in ("shared", "worker", "webui", "cli"):
        for path in (ROOT / package).rglob("*.py"):
            assert "redis.call(" not in path.read_text(), path


def test_a_header_that_disagrees_with_its_caller_is_reported() -> None:
    header = "-- KEYS[1] lease: x\n-- KEYS[2] conversation: y\n-- ARGV[1] token: z\nreturn 1\n"
    assert declaration_errors(header, ["lease", "conversation"], ["token"]) == []
    swapped = declaration_errors(header, ["conversation", "lease"], ["token"])
    assert swapped == [
        "KEYS: the header names ['lease', 'conversation'], Python ['conversation', 'lease']"
    ]
    assert declaration_errors(header, ["lease", "conversation"], ["token", "ttl_ms"])
    misnumbered = header.replace("KEYS[2]", "KEYS[3]")
    assert declaration_errors(misnumbered, ["lease", "conversation"], ["token"]) == [
        "KEYS[3] is key 2 in the header"
    ]
    positional = header + "redis.call('GET', KEYS[1])\n"
    assert "by position" in declaration_errors(positional, ["lease", "conversation"], ["token"])[0]


def test_a_call_with_more_or_fewer_inputs_than_declared_is_refused(
    real_redis: redis.Redis,
) -> None:
    from worker.lease import _RELEASE

    args = ["token", "prefix:", "cid"]
    with pytest.raises(ValueError, match=r"lease_release\.lua takes keys"):
        _RELEASE(real_redis, ["a", "b"], args)
    with pytest.raises(ValueError, match=r"lease_release\.lua takes keys"):
        _RELEASE(real_redis, ["a", "b", "c"], args[:1])
    assert _RELEASE(real_redis, ["lease", "conversation", "inbox"], args) == 0


def test_the_loader_names_inputs_and_single_sourced_constants(real_redis: redis.Redis) -> None:
    from shared.models.steps import USAGE_FIELDS
    from shared.store.history import HISTORY_WRITE_LUA
    from worker.writer import _FLUSH, FLUSH_KEYS

    assert _FLUSH.keys == FLUSH_KEYS
    position = FLUSH_KEYS.index("day_usage") + 1
    assert f"local day_usage_key = KEYS[{position}]" in _FLUSH.body
    assert "local history_keys = {steps = KEYS[8], meta = KEYS[9]" in _FLUSH.body
    assert "local flush = cjson.decode(ARGV[1])" in _FLUSH.body
    counters = ", ".join(f'"{name}"' for name in USAGE_FIELDS)
    assert HISTORY_WRITE_LUA.startswith(f"local usage_counters = {{{counters}}}")


def test_inputs_given_by_name_come_out_in_the_declared_order() -> None:
    from worker.lease import _RELEASE

    named = {"inbox": "i", "lease": "l", "conversation": "c", "events": "unused"}
    assert _RELEASE.keys_from(named) == ["l", "c", "i"]  # keys are picked from a larger set
    assert _RELEASE.args_from({"cid": "c", "token": "t", "note_prefix": "p"}) == ["t", "p", "c"]
    with pytest.raises(ValueError, match=r"declares keys \['lease', 'conversation', 'inbox'\]"):
        _RELEASE.keys_from({"lease": "l", "conversation": "c"})
    with pytest.raises(ValueError, match="declares args"):
        _RELEASE.args_from({"token": "t", "ttl_ms": 1})
