"""Who may settle which approval: the approver role, its scopes, and separation of duties.

An approver (or an operator) may resolve approvals; one with scopes only those its scopes
match. Scopes of one kind are alternatives; kinds together narrow: ``tool:send_email
label:finance`` means calls of send_email in conversations labelled finance. No scopes
means every approval. Separation of duties: whoever created the conversation, its batch,
its schedule or its trigger may not approve its tool calls when the tool's policy rule says
so (`separation`), or by default when that creator is not an operator. Every entry point
(API, pages, bulk, CLI, MCP server) passes a `ResolveCheck` to `NotificationStore.resolve`,
which calls it before the compare-and-set, and the audit entry records the resolver's role
and scopes.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Protocol

from shared.errors import Forbidden, NotFound
from shared.models.notifications import Notification
from shared.models.owners import OWNER_SEPARATOR, InternalOwner
from shared.models.users import Role, scope_text
from shared.store.bundle import Stores
from shared.store.conversations import ConversationRecord
from shared.store.triggers import TriggerStore
from shared.store.users import TokenStore, UserStore

__all__ = ["Approver", "ResolveCheck", "in_scope"]

_QUESTION_TOOL = "ask_operator"


class Approver(Protocol):
    """Who resolves: a name, a role and scopes (the web's `Principal` is one)."""

    @property
    def name(self) -> str: ...

    @property
    def role(self) -> Role: ...

    @property
    def scopes(self) -> tuple[str, ...]: ...


def in_scope(scopes: Iterable[str], note: Notification, record: ConversationRecord | None) -> bool:
    """Whether `note` (of the conversation `record`, if it still exists) is within `scopes`."""
    wanted: dict[str, set[str]] = {}
    for scope in scopes:
        kind, _, value = scope.partition(":")
        wanted.setdefault(kind, set()).add(value)
    if not wanted:
        return True
    config = record.config if record is not None else None
    actual: dict[str, set[str]] = {
        "tool": {note.tool_name} if note.tool_name else set(),
        "batch": {note.batch_id} if note.batch_id else set(),
        "label": set(config.labels) if config is not None else set(),
        "agent": {config.agent} if config is not None and config.agent else set(),
    }
    return all(actual.get(kind, set()) & values for kind, values in wanted.items())


class ResolveCheck:
    """Refuses (Forbidden) a resolution its caller may not make; called with each notification
    before it is settled."""

    def __init__(self, caller: Approver, stores: Stores) -> None:
        self.caller = caller
        self.stores = stores
        self._records: dict[str, ConversationRecord | None] = {}  # read once per check

    @property
    def identity(self) -> str:
        """Who approves: distinct identities make a quorum."""
        return self.caller.name

    @property
    def audit_scope(self) -> str:
        """What the audit entry records of the resolver: its role and its scopes."""
        return f"{self.caller.role.value} {scope_text(self.caller.scopes)}"

    def __call__(self, note: Notification) -> None:
        caller = self.caller
        if not caller.role.allows(Role.APPROVER):
            raise Forbidden(
                f"resolving approvals needs the approver role; {caller.name!r} has "
                f"{caller.role.value}"
            )
        record = self._record(note)
        if not in_scope(caller.scopes, note, record):
            raise Forbidden(
                f"notification {note.id} is outside the scopes of {caller.name!r} "
                f"({scope_text(caller.scopes)}); an approver resolves only what its scopes "
                "match"
            )
        self._check_separation(note, record)

    def _check_separation(self, note: Notification, record: ConversationRecord | None) -> None:
        """Forbidden when the caller created what made this call and the policy keeps
        creators from approving (by default: unless the creator is an operator)."""
        tool = note.tool_name
        if tool is None or tool == _QUESTION_TOOL or record is None:
            return  # a question for a person is answered by whoever asked the agent
        mine = [
            what for what, who in _creators(self.stores, note, record) if who == self.caller.name
        ]
        if not mine:
            return  # not the caller's own: nothing more to read
        labels = record.config.labels
        rule = self.stores.policies.load().rule_for(tool, batch_id=note.batch_id, labels=labels)
        separation = rule.separation if rule is not None else None
        if separation is False:
            return
        if separation is None and _is_operator(self.stores, self.caller.name):
            return
        why = "says so" if separation else "keeps a creator who is not an operator from it"
        raise Forbidden(
            f"separation of duties: {self.caller.name!r} created {mine[0]}, so another approver "
            f"must decide notification {note.id}; the tool policy for {tool} {why}"
        )

    def allows(self, note: Notification) -> bool:
        """Whether the caller may resolve `note` (the inbox's "mine" view)."""
        try:
            self(note)
        except Forbidden:
            return False
        return True

    def _record(self, note: Notification) -> ConversationRecord | None:
        cid = note.conversation_id
        if cid not in self._records:
            try:
                self._records[cid] = self.stores.conversations.get(cid)
            except NotFound:
                self._records[cid] = None
        return self._records[cid]


def _creators(
    stores: Stores, note: Notification, record: ConversationRecord
) -> list[tuple[str, str]]:
    """(what, who) of each identity that created the call's conversation and its source."""
    found: list[tuple[str, str]] = []
    kind, sep, name = record.owner.partition(OWNER_SEPARATOR)
    if record.owner and not sep:
        found.append((f"conversation {record.conversation_id}", record.owner))
    try:
        if note.batch_id:
            found.append((f"batch {note.batch_id}", stores.batches.created_by(note.batch_id)))
        if sep and kind == InternalOwner.SCHEDULE.value:
            found.append((f"schedule {name}", stores.schedules.get(name).created_by))
        if sep and kind == InternalOwner.TRIGGER.value:
            trigger = TriggerStore(stores.redis, stores.keys).get(name)
            found.append((f"trigger {name}", trigger.created_by))
    except NotFound:
        pass  # deleted since: what is left still counts
    return [(what, who) for what, who in found if who]


def _is_operator(stores: Stores, identity: str) -> bool:
    """Whether an account or a token of that name has the operator role."""
    account = UserStore(stores.redis, stores.keys).record(identity)
    if account is not None and account.role is Role.OPERATOR:
        return True
    tokens = TokenStore(stores.redis, stores.keys).tokens()
    return any(t.name == identity and t.role is Role.OPERATOR for t in tokens)
