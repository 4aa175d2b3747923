"""The signed-in caller's right to resolve (and claim) approvals, as every web entry point
checks it."""

from __future__ import annotations

from typing import Any

from shared.approvers import ResolveCheck
from shared.models.notifications import Notification, Resolution
from shared.models.users import Role
from shared.store.claims import Claims
from webui.auth import current_principal
from webui.services import services

__all__ = ["claim", "release", "resolve", "resolve_check"]


def resolve_check() -> ResolveCheck:
    """The caller's check: its role, and an approver's scopes."""
    return ResolveCheck(current_principal(), services().stores)


def resolve(nid: str, decision: Resolution | dict[str, Any]) -> Notification:
    """Resolves as the caller: refused (403) outside its role or scopes, audited with them."""
    check = resolve_check()
    return services().notifications.resolve(
        nid,
        decision,
        actor=current_principal().name,
        check=check,
        audit_scope=check.audit_scope,
    )


def claim(nid: str) -> Notification:
    """Claims as the caller: only who may resolve it may (403 otherwise); audited."""
    check = resolve_check()
    claims = Claims(services().notifications)
    return claims.claim(nid, actor=check.identity, check=check, scope=check.audit_scope)


def release(nid: str) -> Notification:
    """Releases the caller's claim; an operator's releases anyone's. Audited."""
    check, principal = resolve_check(), current_principal()
    force = principal.role is Role.OPERATOR
    claims = Claims(services().notifications)
    return claims.release(nid, actor=check.identity, force=force, scope=check.audit_scope)
