"""What a caller below the operator role may not ask for: the edge of the approval gate.

A submitter may create conversations and batches, but only tighten the operator's tool
policy (never `allow_all`, never a `tools` entry looser than the rules, never labels,
which rules can be scoped by); choose ids only in its own namespace (``<name>.``); and
act only on conversations and batches it created (reading workspace files through a
conversation included). Each refusal is a `Forbidden` naming the field or the record;
the web answers it 403, the MCP server as a tool error. Operators may do all of it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Protocol

from shared.errors import Forbidden, InvalidInput
from shared.models.config import ToolPolicy
from shared.models.users import Role
from shared.store.batches import BatchStore
from shared.store.conversations import ConversationRecord
from shared.store.keys import check_id
from shared.store.policy import PolicyStore, loosening_fields

__all__ = [
    "Caller",
    "check_batch_owner",
    "check_chosen_id",
    "check_conversation_owner",
    "check_role",
    "check_tool_options",
    "is_operator",
]


class Caller(Protocol):
    """Who asks: a user or token name, its role and an approver's scopes (the web's
    `Principal` is one)."""

    @property
    def name(self) -> str: ...

    @property
    def role(self) -> Role: ...

    @property
    def scopes(self) -> tuple[str, ...]: ...


def is_operator(caller: Caller) -> bool:
    return caller.role.allows(Role.OPERATOR)


def check_role(caller: Caller, role: Role, action: str) -> None:
    """Forbidden unless the caller's role includes `role`."""
    if not caller.role.allows(role):
        raise Forbidden(
            f"{action} needs the {role.value} role; {caller.name!r} has {caller.role.value}"
        )


def check_tool_options(
    caller: Caller,
    policies: PolicyStore,
    *,
    tools: Mapping[str, ToolPolicy] | None,
    allow_all: bool,
    labels: list[str] | None,
    batch_id: str | None = None,
    prefix: str = "",
) -> None:
    """Forbidden naming each field by which a non-operator would loosen the operator's policy."""
    if is_operator(caller):
        return
    if labels:
        raise Forbidden(
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
        raise Forbidden(
            f"{named}: the operator's tool policy may only be tightened by a "
            f"{caller.role.value} (ask or deny instead, or leave the tool out); loosening it "
            "needs the operator role",
            [prefix + field for field in fields],
        )


def check_chosen_id(caller: Caller, chosen: str | None, what: str) -> None:
    """A non-operator's chosen id must start with ``<its name>.`` (its own namespace)."""
    if chosen is None or is_operator(caller):
        return
    namespace = f"{caller.name}."
    try:
        check_id(namespace + "x")
    except InvalidInput:
        raise Forbidden(
            f"{what}: the caller's name {caller.name!r} cannot prefix an id; let the server "
            "choose the id",
            [what],
        ) from None
    if not chosen.startswith(namespace) or len(chosen) <= len(namespace):
        raise Forbidden(
            f"{what}: a {caller.role.value} may only choose ids in its own namespace, "
            f"starting with {namespace!r} (or let the server choose one)",
            [what],
        )


def check_conversation_owner(
    caller: Caller,
    record: ConversationRecord,
    *,
    action: str = "send prompts to it, abort or close it",
) -> None:
    """A non-operator acts only on conversations it created."""
    if is_operator(caller) or record.owner == caller.name:
        return
    raise Forbidden(
        f"conversation {record.conversation_id} was not created by {caller.name!r}; only its "
        f"creator or an operator may {action}"
    )


def check_batch_owner(caller: Caller, batches: BatchStore, bid: str) -> None:
    """A non-operator adds items to, or cancels, only batches it created."""
    if is_operator(caller) or batches.created_by(bid) == caller.name:
        return
    raise Forbidden(
        f"batch {bid} was not created by {caller.name!r}; only its creator or an operator "
        "may add items to it or cancel it"
    )
