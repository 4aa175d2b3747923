"""The tools a worker offers: lookup, argument validation, and execution that never raises.

`execute` turns every failure (unknown tool, invalid arguments, `ToolFailed`, any
other exception, a result that is not JSON) into an error outcome for the model,
because a tool's mistake must end the call, never the turn.
"""

from __future__ import annotations

import importlib
import json
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from functools import partial
from typing import Any

from jsonschema import Draft202012Validator

from shared.errors import Conflict, NotFound, SettingsError
from shared.models.mcp import TOOL_SEPARATOR
from shared.models.steps import ToolCall
from shared.schema import schema_violations
from shared.settings import Settings
from worker.providers.base import ToolSpec
from worker.tools.ask_operator import ask_operator
from worker.tools.base import InputNeeded, Tool, ToolContext, ToolFailed
from worker.tools.demo import DEMO_TOOLS
from worker.tools.files import FILE_TOOLS

__all__ = ["BUILTIN_TOOLS", "ToolOutcome", "ToolRegistry", "default_registry", "load_user_tools"]

BUILTIN_TOOLS: tuple[Tool, ...] = (*FILE_TOOLS, *DEMO_TOOLS, ask_operator)


@dataclass(frozen=True)
class ToolOutcome:
    """What a tool call gave: a JSON-serialisable result, or an error message for the model."""

    ok: bool
    result: Any = None
    error: str = ""

    @classmethod
    def success(cls, result: Any) -> ToolOutcome:
        return cls(ok=True, result=result)

    @classmethod
    def failure(cls, error: str) -> ToolOutcome:
        return cls(ok=False, error=error)


class ToolRegistry:
    """Tools by name, in registration order, each with its compiled argument validator."""

    def __init__(self, tools: Iterable[Tool] = ()) -> None:
        self._tools: dict[str, Tool] = {}
        self._validators: dict[str, Validate] = {}
        self._servers: tuple[str, ...] = ()
        for each in tools:
            self.register(each)

    def register(self, tool: Tool) -> None:
        """Adds a tool; a second tool with the same name is refused."""
        if tool.name in self._tools:
            raise Conflict(f"a tool named {tool.name!r} is already registered")
        self._tools[tool.name] = tool
        self._validators[tool.name] = _validator(tool)

    def extended(self, tools: Iterable[Tool], *, servers: Iterable[str] = ()) -> ToolRegistry:
        """A copy with `tools` added (one leg's MCP tools); `servers`: the MCP servers it
        selected, so a call to a tool one of them no longer offers is named as such."""
        copy = ToolRegistry()
        copy._tools, copy._validators = dict(self._tools), dict(self._validators)
        copy._servers = tuple(servers)
        for each in tools:
            if each.name not in copy._tools:
                copy.register(each)
        return copy

    def __contains__(self, name: object) -> bool:
        return name in self._tools

    def get(self, name: str) -> Tool:
        """The tool called `name`; NotFound names it and lists the available ones."""
        try:
            return self._tools[name]
        except KeyError:
            raise NotFound(self._unknown(name)) from None

    def names(self) -> tuple[str, ...]:
        return tuple(self._tools)

    def specs(self, names: Iterable[str] | None = None) -> tuple[ToolSpec, ...]:
        """Specs of the named tools in the given order, or of every tool."""
        chosen = self._tools if names is None else names
        return tuple(self.get(name).spec() for name in chosen)

    def validate_arguments(self, name: str, args: Any) -> list[str]:
        """Every way `args` breaks the tool's schema, each with its JSON path; [] when valid."""
        validator = self._validators.get(name)
        if validator is None:
            raise NotFound(self._unknown(name))
        return validator(args)

    def canonical_path(self, call: ToolCall, settings: Settings) -> str | None:
        """The workspace path a call targets, for tools that target one; None otherwise."""
        found = self._tools.get(call.name)
        if found is None or found.canonical_path is None:
            return None
        return found.canonical_path(call.args, settings)

    def execute(self, call: ToolCall, context: ToolContext) -> ToolOutcome:
        """Validates and runs a call; every failure becomes an error outcome.

        InputNeeded passes through: the call waits for a person, it did not fail.
        """
        if call.name not in self._tools:
            return ToolOutcome.failure(self._unknown(call.name))
        problems = "; ".join(self.validate_arguments(call.name, call.args))
        if problems:
            return ToolOutcome.failure(f"invalid arguments for {call.name!r}: {problems}")
        try:
            result = self._tools[call.name].run(dict(call.args), context)
        except InputNeeded:
            raise  # the call parks on a question (worker/tool_phase.py)
        except ToolFailed as exc:
            return ToolOutcome.failure(exc.message)
        except Exception as exc:
            return ToolOutcome.failure(f"tool {call.name!r} failed: {_describe(exc)}")
        return _json_checked(call.name, result)

    def _unknown(self, name: str) -> str:
        available = ", ".join(sorted(self._tools)) or "none"
        reason = self.gone_reason(name) or f"unknown tool {name!r}"
        return f"{reason}; available tools: {available}"

    def gone_reason(self, name: str) -> str | None:
        """Why `name` is missing when it names a tool of a selected MCP server; else None."""
        server, separator, _ = name.partition(TOOL_SEPARATOR)
        if not separator or server not in self._servers or name in self._tools:
            return None
        return (
            f"tool {name!r} is not offered by MCP server {server!r} (any more: its tool "
            "list changed, or the tool was refused; see `signoff mcp show`)"
        )


Validate = Callable[[Any], list[str]]


def _validator(tool: Tool) -> Validate:
    """Every way arguments break the tool's schema, each with its JSON path."""
    if tool.untrusted_schema:
        return partial(schema_violations, schema=tool.parameters, name=f"arguments of {tool.name}")
    checker = Draft202012Validator(
        tool.parameters, format_checker=Draft202012Validator.FORMAT_CHECKER
    )

    def validate(args: Any) -> list[str]:
        # Every schema has type "object" (Tool checks), so a non-object is reported here too.
        errors = sorted(checker.iter_errors(args), key=lambda err: (err.json_path, err.message))
        return [f"{err.json_path}: {err.message}" for err in errors]

    return validate


def _describe(exc: BaseException) -> str:
    text = str(exc)
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def _json_checked(name: str, result: Any) -> ToolOutcome:
    try:
        json.dumps(result, allow_nan=False)
    except (TypeError, ValueError) as exc:
        return ToolOutcome.failure(f"tool {name!r} returned a result that is not JSON: {exc}")
    return ToolOutcome.success(result)


def load_user_tools(module_path: str) -> tuple[Tool, ...]:
    """The `TOOLS` list of a module named by SIGNOFF_TOOLS_MODULE; SettingsError if unusable."""
    where = f"SIGNOFF_TOOLS_MODULE={module_path!r}"
    try:
        module = importlib.import_module(module_path)
    except Exception as exc:
        raise SettingsError(f"{where} cannot be imported: {_describe(exc)}") from exc
    tools = getattr(module, "TOOLS", None)
    if not isinstance(tools, list | tuple):
        raise SettingsError(f"{where} must define TOOLS, a list of worker.tools.Tool")
    strays = [repr(item) for item in tools if not isinstance(item, Tool)]
    if strays:
        raise SettingsError(f"{where}: TOOLS holds items that are not Tool: {', '.join(strays)}")
    return tuple(tools)


def default_registry(settings: Settings) -> ToolRegistry:
    """The built-in tools, then the user's tools from SIGNOFF_TOOLS_MODULE if set."""
    registry = ToolRegistry(BUILTIN_TOOLS)
    module_path = settings.tools_module.strip()
    for user_tool in load_user_tools(module_path) if module_path else ():
        try:
            registry.register(user_tool)
        except Conflict as exc:
            raise SettingsError(f"SIGNOFF_TOOLS_MODULE={module_path!r}: {exc.message}") from exc
    return registry
