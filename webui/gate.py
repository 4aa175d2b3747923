"""What a caller below the operator role may not ask for: the edge of the approval gate.

A submitter may create conversations and batches, but only tighten the operator's tool
policy (never `allow_all`, never a `tools` entry looser than the rules, never labels,
which rules can be scoped by); choose ids only in its own namespace (``<name>.``); and
act only on conversations and batches it created (reading workspace files through a
conversation included). Each refusal is a 403 naming the field or the record. Operators
may do all of it.
"""

from __future__ import annotations

from collections.abc import Mapping

from shared.errors import InvalidInput
from shared.models.config import ToolPolicy
from shared.store.batches import BatchStore
from shared.store.conversations import ConversationRecord
from shared.store.keys import check_id
from shared.store.policy import PolicyStore, loosening_fields
from shared.store.users import Role
from webui.auth import Principal
from webui.errors import HttpProblem

__all__ = [
    "check_batch_owner",
    "check_chosen_id",
    "check_conversation_owner",
    "check_tool_options",
    "is_operator",
]


def is_operator(principal: Principal) -> bool:
    return principal.role.allows(Role.OPERATOR)


def _forbidden(message: str, fields: list[str] | None = None) -> HttpProblem:
    details = [{"field": field} for field in fields] if fields else None
    return HttpProblem(403, "forbidden", message, details=details)


def check_tool_options(
    principal: Principal,
    policies: PolicyStore,
    *,
    tools: Mapping[str, ToolPolicy] | None,
    allow_all: bool,
    labels: list[str] | None,
    batch_id: str | None = None,
    prefix: str = "",
) -> None:
    """403 naming each field by which a non-operator would loosen the operator's policy."""
    if is_operator(principal):
        return
    if labels:
        raise _forbidden(
            f"{prefix}labels: only an operator may label conversations (tool policy rules "
            "can be scoped by label)",
            [f"{prefix}labels"],
        )
    fields = loosening_fields(
        tools=tools,
        allow_all=allow_all,
        operator=policies.load(),
        catalog=policies.catalog(),
        batch_id=batch_id,
    )
    if fields:
        named = ", ".join(prefix + field for field in fields)
        raise _forbidden(
            f"{named}: the operator's tool policy may only be tightened by a "
            f"{principal.role.value} (ask or deny instead, or leave the tool out); loosening it "
            "needs the operator role",
            [prefix + field for field in fields],
        )


def check_chosen_id(principal: Principal, chosen: str | None, what: str) -> None:
    """A non-operator's chosen id must start with ``<its name>.`` (its own namespace)."""
    if chosen is None or is_operator(principal):
        return
    namespace = f"{principal.name}."
    try:
        check_id(namespace + "x")
    except InvalidInput:
        raise _forbidden(
            f"{what}: the caller's name {principal.name!r} cannot prefix an id; let the server "
            "choose the id",
            [what],
        ) from None
    if not chosen.startswith(namespace) or len(chosen) <= len(namespace):
        raise _forbidden(
            f"{what}: a {principal.role.value} may only choose ids in its own namespace, "
            f"starting with {namespace!r} (or let the server choose one)",
            [what],
        )


def check_conversation_owner(
    principal: Principal,
    record: ConversationRecord,
    *,
    action: str = "send prompts to it, abort or close it",
) -> None:
    """A non-operator acts only on conversations it created."""
    if is_operator(principal) or record.owner == principal.name:
        return
    raise _forbidden(
        f"conversation {record.conversation_id} was not created by {principal.name!r}; only its "
        f"creator or an operator may {action}"
    )


def check_batch_owner(principal: Principal, batches: BatchStore, bid: str) -> None:
    """A non-operator adds items to, or cancels, only batches it created."""
    if is_operator(principal) or batches.created_by(bid) == principal.name:
        return
    raise _forbidden(
        f"batch {bid} was not created by {principal.name!r}; only its creator or an operator "
        "may add items to it or cancel it"
    )
