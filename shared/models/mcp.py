"""MCP tool servers an operator registers, and the tools they offer, on the wire.

A server is reached over stdio (a command the worker starts) or Streamable HTTP (a URL).
Its environment and header values may carry secrets: a request sets them, and no answer
shows them again (`McpServer` names the keys only). Pure: no I/O.
"""

from __future__ import annotations

import shlex
from enum import Enum
from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field, model_validator

from shared.models.config import MCP_SELECTION_PATTERN, ToolPolicy
from shared.models.webhooks import HttpUrl

__all__ = [
    "MCP_SELECTION_PATTERN",
    "SERVER_NAME_PATTERN",
    "TOOL_SEPARATOR",
    "McpServer",
    "McpServerRequest",
    "McpServerState",
    "McpTool",
    "McpToolAnnotations",
    "McpTransport",
    "default_policy",
    "exposed_name",
]

# A server's name starts every tool name it offers (`notes__list_notes`): letters, digits, '-'
# only, so the `__` separator is unambiguous and the whole stays within the provider charset.
SERVER_NAME_PATTERN = r"^[A-Za-z0-9-]{1,32}$"
TOOL_SEPARATOR = "__"
_ENV_KEY = r"^[A-Za-z_][A-Za-z0-9_]{0,127}$"
_HEADER_KEY = r"^[A-Za-z0-9!#$%&'*+.^_`|~-]{1,128}$"
_Value = Annotated[str, Field(max_length=8_000, pattern=r"^[^\x00\r\n]*$")]


class McpTransport(str, Enum):
    STDIO = "stdio"
    HTTP = "http"


class McpServerState(str, Enum):
    """Where discovery stands: not yet tried, tools listed, or the last attempt failed."""

    PENDING = "pending"
    CONNECTED = "connected"
    FAILING = "failing"


class McpServerRequest(BaseModel):
    """What an operator registers: a name, and a command or a URL (not both)."""

    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={  # the API says it: command (with env) or url (with headers)
            "oneOf": [
                {
                    "required": [given],
                    "properties": {
                        given: {"not": {"type": "null"}},
                        absent: {"type": "null"},
                        other: {"maxProperties": 0},
                    },
                }
                for given, absent, other in (
                    ("command", "url", "headers"),
                    ("url", "command", "env"),
                )
            ]
        },
    )

    name: str = Field(pattern=SERVER_NAME_PATTERN, description="Letters, digits and '-' (1-32).")
    command: str | None = Field(
        None,
        min_length=1,
        max_length=4_000,
        description="stdio: the command line the worker starts (split as a shell would, "
        "without a shell).",
    )
    env: dict[Annotated[str, Field(pattern=_ENV_KEY)], _Value] = Field(
        default_factory=dict, max_length=64, description="stdio: extra environment (write-only)."
    )
    url: HttpUrl | None = Field(None, description="Streamable HTTP: the server's endpoint.")
    headers: dict[Annotated[str, Field(pattern=_HEADER_KEY)], _Value] = Field(
        default_factory=dict, max_length=64, description="HTTP: headers sent (write-only)."
    )
    trusted: bool = Field(
        False, description="Its read-only tools (readOnlyHint) run without asking by default."
    )

    @model_validator(mode="after")
    def _one_transport(self) -> McpServerRequest:
        if (self.command is None) == (self.url is None):
            raise ValueError("give command (stdio) or url (Streamable HTTP), exactly one")
        if self.command is not None and self.headers:
            raise ValueError("headers are for a url server; a command server takes env")
        if self.url is not None and self.env:
            raise ValueError("env is for a command server; a url server takes headers")
        if self.command is not None:
            argv = split_command(self.command)
            if not argv:
                raise ValueError("command is empty")
        return self

    @property
    def transport(self) -> McpTransport:
        return McpTransport.STDIO if self.command is not None else McpTransport.HTTP


def split_command(command: str) -> list[str]:
    """The argv of a command line; ValueError naming the problem when it does not split."""
    try:
        return shlex.split(command)
    except ValueError as exc:
        raise ValueError(f"command does not split into arguments: {exc}") from None


class McpToolAnnotations(BaseModel):
    """The server's hints about a tool: hints only, trusted only as far as its server is."""

    title: str | None = None
    read_only: bool | None = Field(None, description="readOnlyHint")
    destructive: bool | None = Field(None, description="destructiveHint")
    idempotent: bool | None = Field(None, description="idempotentHint")
    open_world: bool | None = Field(None, description="openWorldHint")


class McpTool(BaseModel):
    """One tool as the server listed it, and how Signoff offers it (or why it does not)."""

    name: str = Field(description="The server's name for it.")
    exposed: str = Field("", description="`server__tool`, as the model sees it; empty if refused.")
    description: str = ""
    input_schema: dict[str, Any] = Field(default_factory=dict)
    annotations: McpToolAnnotations = Field(default_factory=McpToolAnnotations)
    problem: str = Field("", description="Why it is not offered (empty: it is).")


class McpServer(BaseModel):
    """A registered server as shown: no environment or header value, only their names."""

    name: str
    transport: McpTransport
    command: str | None = None
    url: str | None = None
    env_keys: list[str] = Field(default_factory=list, description="Values are write-only.")
    header_keys: list[str] = Field(default_factory=list, description="Values are write-only.")
    trusted: bool = False
    state: McpServerState = McpServerState.PENDING
    last_error: str = ""
    tools_version: int = Field(0, description="One more each time its tool list changes.")
    tools: list[McpTool] = Field(default_factory=list)
    problems: list[str] = Field(default_factory=list, description="About the listing as a whole.")
    refreshed_at: float | None = Field(None, description="Last discovery attempt (Unix time).")
    created_at: float
    created_by: str

    def offered(self) -> list[McpTool]:
        """The tools the model may be offered (refused ones left out)."""
        return [tool for tool in self.tools if tool.exposed and not tool.problem]

    def default_policy(self, tool: McpTool) -> ToolPolicy:
        return default_policy(tool.annotations, trusted=self.trusted)


def default_policy(annotations: McpToolAnnotations, *, trusted: bool) -> ToolPolicy:
    """`auto` only for a tool that says it is read-only on a server the operator trusts."""
    return ToolPolicy.AUTO if trusted and annotations.read_only is True else ToolPolicy.ASK


def exposed_name(server: str, tool: str) -> str:
    return f"{server}{TOOL_SEPARATOR}{tool}"
