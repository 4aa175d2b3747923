"""The tools a worker offers: lookup, argument validation, and execution that never raises.

`execute` turns every failure (unknown tool, invalid arguments, `ToolFailed`, any
other exception, a result that is not JSON) into an error outcome for the model,
because a tool's mistake must end the call, never the turn.
"""

from __future__ import annotations

import importlib
import json
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from jsonschema import Draft202012Validator

from shared.errors import Conflict, NotFound, SettingsError
from shared.models.steps import ToolCall
from shared.settings import Settings
from worker.providers.base import ToolSpec
from worker.tools.ask_operator import ask_operator
from worker.tools.base import Tool, ToolContext, ToolFailed
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
        self._validators: dict[str, Draft202012Validator] = {}
        for each in tools:
            self.register(each)

    def register(self, tool: Tool) -> None:
        """Adds a tool; a second tool with the same name is refused."""
        if tool.name in self._tools:
            raise Conflict(f"a tool named {tool.name!r} is already registered")
        self._tools[tool.name] = tool
        self._validators[tool.name] = Draft202012Validator(
            tool.parameters, format_checker=Draft202012Validator.FORMAT_CHECKER
        )

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
        # Every schema has type "object" (Tool checks), so a non-object is reported here too.
        errors = sorted(validator.iter_errors(args), key=lambda err: (err.json_path, err.message))
        return [f"{err.json_path}: {err.message}" for err in errors]

    def canonical_path(self, call: ToolCall, settings: Settings) -> str | None:
        """The workspace path a call targets, for tools that target one; None otherwise."""
        found = self._tools.get(call.name)
        if found is None or found.canonical_path is None:
            return None
        return found.canonical_path(call.args, settings)

    def execute(self, call: ToolCall, context: ToolContext) -> ToolOutcome:
        """Validates and runs a call; every failure becomes an error outcome."""
        if call.name not in self._tools:
            return ToolOutcome.failure(self._unknown(call.name))
        problems = "; ".join(self.validate_arguments(call.name, call.args))
        if problems:
            return ToolOutcome.failure(f"invalid arguments for {call.name!r}: {problems}")
        try:
            result = self._tools[call.name].run(dict(call.args), context)
        except ToolFailed as exc:
            return ToolOutcome.failure(exc.message)
        except Exception as exc:
            return ToolOutcome.failure(f"tool {call.name!r} failed: {_describe(exc)}")
        return _json_checked(call.name, result)

    def _unknown(self, name: str) -> str:
        available = ", ".join(sorted(self._tools)) or "none"
        return f"unknown tool {name!r}; available tools: {available}"


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
