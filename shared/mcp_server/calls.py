"""What each MCP tool does, through the product's own client, stores and gate.

Each function takes the caller and its checked arguments and goes the way the JSON API
goes: the gate's role and tool-policy checks, `Client.new_conversation` and
`Conversation.send` (the same validation), the inbox's store, and the notification
store's compare-and-set resolution. Errors are Signoff's own; the server turns them
into tool errors.
"""

from __future__ import annotations

import logging

from shared.approvers import ResolveCheck
from shared.client import Client
from shared.errors import CorruptRecord, InvalidInput
from shared.gate import Caller, check_role, check_tool_options, is_operator
from shared.mcp_server.schemas import (
    Approval,
    ApprovalList,
    ConversationState,
    GetConversationInput,
    ListApprovalsInput,
    ResolveApprovalInput,
    Resolved,
    StartConversationInput,
    Started,
    TurnState,
)
from shared.models.config import ToolPolicy
from shared.models.notifications import Allow, Deny, Notification, Resolution, Submit
from shared.models.pending import PendingFilter
from shared.models.users import Role
from shared.validation import conversation_options, validate_prompt

__all__ = [
    "RESOLVING_ROLE",
    "get_conversation",
    "list_pending_approvals",
    "resolve_approval",
    "start_conversation",
]

log = logging.getLogger(__name__)

RESOLVING_ROLE = Role.APPROVER  # as `POST /api/v1/notifications/<id>/resolve`


def start_conversation(client: Client, caller: Caller, args: StartConversationInput) -> Started:
    """A new conversation owned by the caller, with the prompt queued as its first turn."""
    check_role(caller, Role.SUBMITTER, "start_conversation")
    prompt = validate_prompt(args.prompt, client.settings)  # before anything is created
    tools = {name: ToolPolicy(value) for name, value in (args.tools or {}).items()} or None
    check_tool_options(caller, client.stores.policies, tools=tools, allow_all=False, labels=None)
    chosen = {
        "tools": tools,
        "mcp": args.mcp,
        "agent": args.agent,
        "agent_version": args.agent_version,
    }
    options = conversation_options(**{k: v for k, v in chosen.items() if v is not None})
    conversation = client.new_conversation(
        options, owner=caller.name, policy_may_loosen=is_operator(caller)
    )
    turn_id = conversation.send(prompt)
    return Started(
        conversation_id=conversation.conversation_id, turn_id=turn_id, status=conversation.status
    )


def get_conversation(
    client: Client, caller: Caller, args: GetConversationInput
) -> ConversationState:
    """A conversation's status, its last answer, its pending approvals, and a turn of it."""
    check_role(caller, Role.VIEWER, "get_conversation")
    cid = args.conversation_id
    record = client.store.get(cid)
    answer, structured = client.stores.history(cid).last_answer()
    return ConversationState(
        conversation_id=cid,
        status=record.status,
        closed=record.closed,
        agent=record.config.agent,
        queued=record.queued,
        last_turn_status=record.last_turn_status,
        answer=answer,
        structured_output=structured,
        pending_approvals=client.notifications.pending_ids(conversation_id=cid, limit=100),
        turn=None if args.turn_id is None else _turn(client, cid, args.turn_id),
    )


def _turn(client: Client, cid: str, turn_id: str) -> TurnState:
    record = client.store.turn(cid, turn_id)
    response = record.response()
    return TurnState(
        turn_id=turn_id,
        status=record.status,
        answer=None if response is None else response.text,
        structured_output=None if response is None else response.structured_output,
        error=record.fields.get("error") or None,
    )


def list_pending_approvals(
    client: Client, caller: Caller, args: ListApprovalsInput
) -> ApprovalList:
    """One page of the inbox, oldest first, with the inbox's filters."""
    check_role(caller, Role.VIEWER, "list_pending_approvals")
    store, tool = client.notifications, args.tool or None
    where = PendingFilter(
        tool=tool,
        batch_id=args.batch_id,
        conversation_id=args.conversation_id,
        min_age_s=args.min_age_s,
    )
    ids = store.pending_ids(where, offset=args.offset, limit=args.limit)
    count = store.count_pending(where)
    return ApprovalList(
        pending_count=count,
        offset=args.offset,
        limit=args.limit,
        items=[_approval(note) for note in store.load(ids, on_corrupt=_skip)],
    )


def _skip(error: CorruptRecord) -> None:
    """One unreadable record cannot take the listing down; its key is logged."""
    log.warning("left out of list_pending_approvals: %s", error.message)


def _approval(note: Notification) -> Approval:
    return Approval(
        id=note.id,
        conversation_id=note.conversation_id,
        turn_id=note.turn_id,
        batch_id=note.batch_id,
        title=note.title,
        tool=note.tool_name,
        arguments=note.tool_call.args if note.tool_call else None,
        question=note.question,
        allowed=[kind.value for kind in note.allowed],
        arguments_schema=note.arguments_schema,
        submit_schema=note.submit_schema,
        created_at=note.created_at,
        expires_at=note.expires_at,
    )


def resolve_approval(client: Client, caller: Caller, args: ResolveApprovalInput) -> Resolved:
    """Allow, Deny or Submit by the notification store's compare-and-set: the first one wins."""
    check_role(caller, RESOLVING_ROLE, "resolve_approval")
    check = ResolveCheck(caller, client.stores)  # scopes and separation, as the API's
    note = client.notifications.resolve(
        args.approval_id,
        _resolution(args),
        actor=caller.name,
        check=check,
        audit_scope=check.audit_scope,
    )
    return Resolved(
        id=note.id,
        status=note.status,
        decision=note.resolution.kind if note.resolution else None,
        resolved_by=note.resolved_by,
        resolved_at=note.resolved_at,
    )


def _resolution(args: ResolveApprovalInput) -> Resolution:
    """The decision, refusing fields that belong to another one."""
    extra = {
        "arguments": args.arguments is not None and args.decision != "allow",
        "reason": args.reason is not None and args.decision != "deny",
        "content": args.content is not None and args.decision != "submit",
    }
    if wrong := [name for name, misplaced in extra.items() if misplaced]:
        raise InvalidInput(f"{', '.join(wrong)}: not taken by decision {args.decision!r}")
    if args.decision == "allow":
        return Allow(arguments=args.arguments)
    if args.decision == "deny":
        if not (args.reason or "").strip():
            raise InvalidInput("reason: a denial needs a reason the agent can read")
        return Deny(reason=args.reason or "")
    return Submit(content=args.content)
