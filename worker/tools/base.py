"""What a tool is: a name, a JSON schema for its arguments, a function, and a default policy.

A tool's ``run`` takes the validated arguments and a `ToolContext` and returns a
JSON-serialisable result. It reports a failure the model should see by raising
`ToolFailed`; the registry turns that (and any other exception) into an error result.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from jsonschema import Draft202012Validator, SchemaError

from shared.errors import InvalidInput, SignoffError
from shared.models.config import ToolPolicy
from shared.settings import Settings
from worker.providers.base import ToolSpec

__all__ = [
    "AskPerson",
    "CanonicalPath",
    "InputNeeded",
    "Resumed",
    "Tool",
    "ToolContext",
    "ToolFailed",
    "ToolRun",
    "object_schema",
    "tool",
]

# The common subset of what OpenAI-compatible APIs and Ollama accept as a function name.
_NAME = re.compile(r"[A-Za-z0-9_-]{1,64}")


class ToolFailed(SignoffError):
    """Raised when a tool cannot do what was asked; its message goes back to the model."""

    code = "tool_failed"


class InputNeeded(SignoffError):
    """Raised when a tool cannot finish without a person's input: the call parks on a
    question (`question`, answered against `schema`) and runs again with the answer and
    `state`, the tool's own record of where it stood."""

    code = "input_needed"

    def __init__(self, question: str, schema: dict[str, Any], state: str) -> None:
        super().__init__(question, schema, state)
        self.question, self.schema, self.state = question, schema, state


@dataclass(frozen=True)
class Resumed:
    """A call running again after `InputNeeded`: its state, and the answer (None: declined)."""

    state: str
    answer: dict[str, Any] | None


# Asks a person while the call runs: (title, question, JSON schema, wait in s) -> their
# resolution (Submit or Deny), or None when it expired; InvalidInput for an unusable schema.
AskPerson = Callable[[str, str, dict[str, Any], float], Any]


@dataclass(frozen=True)
class ToolContext:
    """Who is calling a tool: the settings and the ids of the conversation, turn and call.

    `ask`: how the running call can ask a person (an MCP server's input request), if it can.
    """

    settings: Settings
    conversation_id: str
    turn_id: str
    call_id: str
    ask: AskPerson | None = None
    resumed: Resumed | None = None


ToolRun = Callable[[dict[str, Any], ToolContext], Any]
CanonicalPath = Callable[[Any, Settings], str | None]


@dataclass(frozen=True)
class Tool:
    """A callable the model may request; `canonical_path` is set on tools that target a file.

    `canonical_path(args, settings)` returns the workspace-relative path a call would
    touch (or None), so the runtime can record it in ``ToolCall.canonical_path``.
    """

    name: str
    description: str
    parameters: dict[str, Any]
    run: ToolRun
    policy: ToolPolicy = ToolPolicy.AUTO
    canonical_path: CanonicalPath | None = None
    approval_timeout_s: int | None = None  # overrides the conversation's and the default
    # A schema from outside (an MCP server's): arguments are checked with the bounded re2
    # validator of user schemas, never with Python's `re`.
    untrusted_schema: bool = False
    server: str | None = None  # the MCP server that runs it; None for a Python tool

    def __post_init__(self) -> None:
        if not _NAME.fullmatch(self.name):
            raise InvalidInput(f"tool name {self.name!r} must be 1-64 letters, digits, '_' or '-'")
        _check_parameters(self.name, self.parameters)

    def spec(self) -> ToolSpec:
        """What a provider shows the model."""
        return ToolSpec(name=self.name, description=self.description, parameters=self.parameters)


def _check_parameters(name: str, parameters: dict[str, Any]) -> None:
    if not isinstance(parameters, dict) or parameters.get("type") != "object":
        raise InvalidInput(f"tool {name!r}: parameters must be a JSON schema with type 'object'")
    try:
        Draft202012Validator.check_schema(parameters)
    except SchemaError as exc:
        problem = f"tool {name!r}: parameters is not a JSON schema: {exc.message}"
        raise InvalidInput(problem) from exc


def object_schema(
    properties: dict[str, dict[str, Any]], *, required: tuple[str, ...] = ()
) -> dict[str, Any]:
    """An arguments schema that rejects unknown keys, so a misspelt argument is reported."""
    return {
        "type": "object",
        "properties": properties,
        "required": list(required),
        "additionalProperties": False,
    }


def tool(
    *,
    parameters: dict[str, Any],
    name: str | None = None,
    description: str | None = None,
    policy: ToolPolicy = ToolPolicy.AUTO,
    canonical_path: CanonicalPath | None = None,
) -> Callable[[ToolRun], Tool]:
    """Turns a function into a `Tool`; name and description default to its name and docstring."""

    def build(run: ToolRun) -> Tool:
        summary = " ".join((run.__doc__ or "").strip().split("\n\n")[0].split())
        return Tool(
            name=name or run.__name__,
            description=summary if description is None else description,
            parameters=parameters,
            run=run,
            policy=policy,
            canonical_path=canonical_path,
        )

    return build
