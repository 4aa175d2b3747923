"""Who may do what: the roles of accounts and API tokens."""

from __future__ import annotations

from collections.abc import Iterable
from enum import Enum

from shared.errors import InvalidInput

__all__ = ["MAX_SCOPES", "SCOPE_KINDS", "Role", "check_scopes", "scope_text"]

# An approver's scopes (`shared.approvers`): kind:value, kinds together narrow.
SCOPE_KINDS = ("tool", "label", "batch", "agent")
MAX_SCOPES = 50
_MAX_SCOPE = 200


class Role(str, Enum):
    """What a caller may do; a role includes the ones `_INCLUDES` lists for it."""

    VIEWER = "viewer"  # reads
    SUBMITTER = "submitter"  # creates conversations, sends prompts, aborts, closes
    APPROVER = "approver"  # reads and resolves approvals (within its scopes), nothing else
    OPERATOR = "operator"  # everything: also the tool policy, agents, tokens, users

    def allows(self, required: Role) -> bool:
        return required in _INCLUDES[self]


# An approver may approve, and only that: it cannot submit, so the people who ask and
# the people who approve can be kept apart. An operator includes every role.
_INCLUDES = {
    Role.VIEWER: frozenset({Role.VIEWER}),
    Role.SUBMITTER: frozenset({Role.VIEWER, Role.SUBMITTER}),
    Role.APPROVER: frozenset({Role.VIEWER, Role.APPROVER}),
    Role.OPERATOR: frozenset(Role),
}


def check_scopes(values: Iterable[str], *, field: str = "scope") -> tuple[str, ...]:
    """The scopes, each ``kind:value`` with a known kind, without repeats; InvalidInput naming
    the field otherwise."""
    found: list[str] = []
    for raw in values:
        value = raw.strip() if isinstance(raw, str) else raw
        kind, sep, target = value.partition(":") if isinstance(value, str) else ("", "", "")
        if not sep or kind not in SCOPE_KINDS or not target.strip() or len(value) > _MAX_SCOPE:
            raise InvalidInput(
                f"{field}: {str(raw)[:60]!r} must be kind:value with kind one of "
                f"{', '.join(SCOPE_KINDS)} (at most {_MAX_SCOPE} characters)"
            )
        if value not in found:
            found.append(value)
    if len(found) > MAX_SCOPES:
        raise InvalidInput(f"{field}: at most {MAX_SCOPES} scopes, not {len(found)}")
    return tuple(found)


def scope_text(scopes: Iterable[str]) -> str:
    """The scopes as the audit log and messages show them; ``*`` for every approval."""
    return " ".join(scopes) or "*"
