"""`--as NAME` naming an account: the CLI resolves as that account, within its role and scopes.

A NAME that is no account is only recorded (``cli:NAME``): whoever runs the CLI holds the
Redis credentials, so it answers as the installation's owner, as before.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from shared.approvers import ResolveCheck
from shared.client import Client
from shared.errors import Forbidden
from shared.models.notifications import Notification, Resolution
from shared.models.users import Role
from shared.store.users import UserStore

__all__ = ["AccountCaller", "account_check", "resolve_as"]


@dataclass(frozen=True)
class AccountCaller:
    """An account's name, role and scopes: a `shared.approvers.Approver`."""

    name: str
    role: Role
    scopes: tuple[str, ...] = ()


def account_check(client: Client, as_name: str | None) -> ResolveCheck | None:
    """The check of the account `as_name` names; None when it names none."""
    if as_name is None:
        return None
    record = UserStore(client.redis, client.keys).record(as_name)
    if record is None:
        return None
    if record.disabled:
        raise Forbidden(f"account {as_name!r} is disabled; it may not resolve approvals")
    return ResolveCheck(AccountCaller(as_name, record.role, tuple(record.scopes)), client.stores)


def resolve_as(
    client: Client,
    nid: str,
    resolution: Resolution | dict[str, Any],
    *,
    actor: str,
    as_name: str | None,
) -> Notification:
    """Resolves one notification, as the account `as_name` names if it names one."""
    check = account_check(client, as_name)
    return client.notifications.resolve(
        nid,
        resolution,
        actor=actor,
        check=check,
        audit_scope=check.audit_scope if check is not None else "",
    )
