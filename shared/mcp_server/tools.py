"""The catalog of Signoff's MCP tools: name, description, arguments, answer and role of each."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel

from shared.client import Client
from shared.gate import Caller
from shared.mcp_server import calls
from shared.mcp_server.schemas import (
    ApprovalList,
    ConversationState,
    GetConversationInput,
    ListApprovalsInput,
    ResolveApprovalInput,
    Resolved,
    StartConversationInput,
    Started,
    ToolInput,
)
from shared.models.users import Role

__all__ = ["TOOLS", "SignoffTool", "find_tool"]


@dataclass(frozen=True)
class SignoffTool:
    """One tool: what a model reads about it, what it takes and answers, who may call it."""

    name: str
    title: str
    description: str
    arguments: type[ToolInput]
    answer: type[BaseModel]
    role: Role
    run: Callable[[Client, Caller, Any], BaseModel]
    read_only: bool = False
    idempotent: bool = False


TOOLS: tuple[SignoffTool, ...] = (
    SignoffTool(
        name="start_conversation",
        title="Start a Signoff conversation",
        description=(
            "Hand a task to a Signoff agent, which runs it in the background as a job. "
            "Tool calls that need a person's sign-off park the conversation until an "
            "operator decides (see list_pending_approvals), so the work may take minutes or "
            "days. Answers at once with the conversation and turn ids: poll get_conversation "
            "with both for the status and the answer. Needs the submitter role."
        ),
        arguments=StartConversationInput,
        answer=Started,
        role=Role.SUBMITTER,
        run=calls.start_conversation,
    ),
    SignoffTool(
        name="get_conversation",
        title="Read a conversation's status and answer",
        description=(
            "Read a Signoff conversation: its status (idle, running, waiting_for_user: parked "
            "until a person resolves an approval, closed), its last answer and its pending "
            "approvals. With turn_id, also that turn's status and, once completed, its final "
            "answer."
        ),
        arguments=GetConversationInput,
        answer=ConversationState,
        role=Role.VIEWER,
        run=calls.get_conversation,
        read_only=True,
        idempotent=True,
    ),
    SignoffTool(
        name="list_pending_approvals",
        title="List approvals waiting for a person",
        description=(
            "List what waits for a person's decision, oldest first: tool calls agents want to "
            "make (the tool and its arguments) and questions they ask. Filter by tool, batch, "
            "conversation or minimum wait; pending_count is the total that match."
        ),
        arguments=ListApprovalsInput,
        answer=ApprovalList,
        role=Role.VIEWER,
        run=calls.list_pending_approvals,
        read_only=True,
        idempotent=True,
    ),
    SignoffTool(
        name="resolve_approval",
        title="Allow, deny or answer a pending approval",
        description=(
            "Decide a pending approval: allow the tool call (optionally with edited arguments), "
            "deny it with a reason the agent reads, or submit an answer to the agent's question. "
            "The agent's conversation then goes on. The first decision wins: a second one is "
            "refused, saying who decided and when. Needs the approver role (within its "
            "scopes) or the operator role."
        ),
        arguments=ResolveApprovalInput,
        answer=Resolved,
        role=calls.RESOLVING_ROLE,
        run=calls.resolve_approval,
    ),
)

_BY_NAME = {tool.name: tool for tool in TOOLS}


def find_tool(name: str) -> SignoffTool | None:
    return _BY_NAME.get(name)
