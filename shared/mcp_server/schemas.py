"""What each MCP tool takes and answers: pydantic models whose JSON Schemas a model reads.

Inputs forbid unknown fields and spell choices as literals, so the schemas carry their
enums inline; every field says what it is for in words a model can act on.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from shared.models.config import (
    AGENT_NAME_PATTERN,
    MAX_MCP_SELECTIONS,
    MCP_SELECTION_PATTERN,
    TOOL_NAME_PATTERN,
)
from shared.models.events import ConversationStatus, TurnStatus
from shared.models.notifications import NotificationStatus
from shared.store.keys import ID_PATTERN

__all__ = [
    "Approval",
    "ApprovalList",
    "ConversationState",
    "GetConversationInput",
    "ListApprovalsInput",
    "ResolveApprovalInput",
    "Resolved",
    "StartConversationInput",
    "Started",
    "ToolInput",
    "TurnState",
]

_CONVERSATION_ID = Field(
    pattern=f"^{ID_PATTERN}$",
    description="The conversation's id, as start_conversation returned it.",
)
_APPROVAL_ID = Field(
    min_length=3,
    max_length=128,
    pattern=r"^[A-Za-z0-9_.\-]+\.[A-Za-z0-9_\-]+$",
    description="The approval's id, as list_pending_approvals returned it.",
)


class ToolInput(BaseModel):
    """Arguments of a tool: unknown fields are refused, naming them."""

    model_config = ConfigDict(extra="forbid")


class StartConversationInput(ToolInput):
    prompt: str = Field(
        min_length=1,
        description="The task for the agent, in plain language. It runs in the background: "
        "poll get_conversation with the returned ids for its status and answer.",
    )
    agent: str | None = Field(
        None,
        pattern=AGENT_NAME_PATTERN,
        description="Run as this agent, configured by an operator (its system prompt, model "
        "and tools). Omit to use the server's default options.",
    )
    agent_version: int | None = Field(
        None, ge=1, description="With agent: this version of it (default: its latest)."
    )
    tools: dict[str, Literal["auto", "ask", "deny"]] | None = Field(
        None,
        description="Tighten the tool policy of this conversation, tool name -> 'ask' (a person "
        "approves each call) or 'deny' (never run). Only an operator may loosen a tool to "
        "'auto' beyond the operator's policy. Omit to keep the operator's policy.",
        json_schema_extra={"propertyNames": {"pattern": TOOL_NAME_PATTERN}},
    )
    mcp: list[Annotated[str, Field(pattern=MCP_SELECTION_PATTERN)]] | None = Field(
        None,
        max_length=MAX_MCP_SELECTIONS,
        description="MCP servers an operator registered in Signoff (or `server/tool` names) "
        "whose tools the agent may use; each call still goes through the operator's tool "
        "policy. Omit for none (an agent brings its own).",
    )


class Started(BaseModel):
    conversation_id: str = Field(description="Pass it to get_conversation.")
    turn_id: str = Field(description="The prompt's turn; pass it to get_conversation.")
    status: ConversationStatus


class GetConversationInput(ToolInput):
    conversation_id: str = _CONVERSATION_ID
    turn_id: str | None = Field(
        None,
        pattern=f"^{ID_PATTERN}$",
        description="A turn of it (start_conversation returns one): its status and, once "
        "completed, its answer. Omit for the conversation alone.",
    )


class TurnState(BaseModel):
    turn_id: str
    status: TurnStatus = Field(
        description="queued, running, waiting_for_user (parked until a person resolves an "
        "approval), completed, failed or cancelled."
    )
    answer: str | None = Field(description="The turn's final answer once completed, else null.")
    structured_output: Any = Field(None, description="With a response schema: the answer as JSON.")
    error: str | None = Field(None, description="Why it failed, when it failed.")


class ConversationState(BaseModel):
    conversation_id: str
    status: ConversationStatus = Field(
        description="idle (nothing to do), running, waiting_for_user (parked for an approval) "
        "or closed."
    )
    closed: bool
    agent: str | None = Field(description="The agent it runs as, if any.")
    queued: int = Field(description="Prompts waiting behind the running one.")
    last_turn_status: TurnStatus | None = Field(description="How its last ended turn ended.")
    answer: str = Field(
        description="The text of its last model response: the last completed turn's answer "
        "while no turn runs; empty before any."
    )
    structured_output: Any = None
    pending_approvals: list[str] = Field(
        description="Ids of its approvals waiting for a person (resolve_approval takes them)."
    )
    turn: TurnState | None = Field(None, description="The turn asked for with turn_id.")


class ListApprovalsInput(ToolInput):
    tool: str | None = Field(
        None, max_length=128, description="Only calls of this tool (e.g. send_email)."
    )
    batch_id: str | None = Field(
        None, pattern=f"^{ID_PATTERN}$", description="Only approvals of this batch's items."
    )
    conversation_id: str | None = Field(
        None, pattern=f"^{ID_PATTERN}$", description="Only this conversation's approvals."
    )
    min_age_s: float | None = Field(
        None,
        ge=0,
        le=10 * 366 * 86_400,
        description="Only those waiting this many seconds or more.",
    )
    offset: int = Field(0, ge=0, le=1_000_000, description="Skip this many (oldest first).")
    limit: int = Field(20, ge=1, le=100, description="At most this many.")


class Approval(BaseModel):
    id: str = Field(description="Pass it to resolve_approval.")
    conversation_id: str
    turn_id: str
    batch_id: str | None
    title: str
    tool: str | None = Field(description="The tool the agent wants to call; null for a question.")
    arguments: Any = Field(description="The arguments it would be called with.")
    question: str | None = Field(description="A question the agent asks (answer with submit).")
    allowed: list[str] = Field(description="Decisions this approval takes: allow, deny, submit.")
    arguments_schema: dict[str, Any] | None = Field(
        description="What edited arguments must satisfy."
    )
    submit_schema: dict[str, Any] | None = Field(
        description="What a submitted answer must satisfy."
    )
    created_at: float = Field(description="Unix time it was asked.")
    expires_at: float | None = Field(description="Unix time it is denied as expired.")


class ApprovalList(BaseModel):
    pending_count: int = Field(description="Pending approvals matching the filters, in all.")
    offset: int
    limit: int
    items: list[Approval]


class ResolveApprovalInput(ToolInput):
    approval_id: str = _APPROVAL_ID
    decision: Literal["allow", "deny", "submit"] = Field(
        description="allow: run the tool (with `arguments`, run it with those instead); deny: "
        "do not run it, the agent is told `reason`; submit: answer the agent's question with "
        "`content`."
    )
    arguments: dict[str, Any] | None = Field(
        None,
        description="With allow: the edited arguments to run the tool with, whole (checked "
        "against the tool's schema). Omit to run it as asked.",
    )
    reason: str | None = Field(
        None, max_length=2000, description="With deny: why, in words the agent reads. Required."
    )
    content: Any = Field(
        None, description="With submit: the answer, valid against the question's schema."
    )


class Resolved(BaseModel):
    id: str
    status: NotificationStatus
    decision: str | None = Field(description="allow, deny or submit.")
    resolved_by: str | None
    resolved_at: float | None
