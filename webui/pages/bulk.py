"""Bulk approvals in the inbox: the count first, then the action, confirmed with that count."""

from __future__ import annotations

from typing import Any

from flask import Blueprint, flash, redirect, render_template, request, url_for
from flask.typing import ResponseReturnValue
from pydantic import ValidationError

from shared.errors import InvalidInput
from shared.models.notifications import RESOLUTION, Resolution, ResolutionKind
from shared.models.users import Role
from webui.approvals.access import resolve_check
from webui.approvals.bulk import BULK_LIMIT, BulkScope, CountChanged, apply, scope_of
from webui.approvals.inbox import InboxFilter
from webui.auth import current_principal, requires
from webui.errors import HttpProblem
from webui.services import services

__all__ = ["blueprint"]

SAMPLE = 10
_VERBS = {ResolutionKind.ALLOW: "Allowed", ResolutionKind.DENY: "Denied"}


def _kind(raw: str | None) -> ResolutionKind:
    kind = next((kind for kind in _VERBS if kind.value == raw), None)
    if kind is None:
        raise HttpProblem(400, "bad_parameter", "decision must be allow or deny")
    return kind


def _number(form: Any, name: str, kind: type[float] | type[int]) -> Any:
    try:
        return kind(form.get(name, ""))
    except ValueError:
        raise HttpProblem(400, "bad_parameter", f"form field {name!r} is missing or bad") from None


def _confirmation(
    scope: BulkScope,
    kind: ResolutionKind,
    count: int,
    *,
    status: int = 200,
    changed_from: int | None = None,
    error: str | None = None,
    reason: str = "",
) -> ResponseReturnValue:
    store = services().notifications
    page = render_template(
        "bulk.html",
        scope=scope,
        filters=scope.inbox,
        kind=kind,
        count=count,
        sample=scope.notes(store, limit=SAMPLE) if 0 < count <= BULK_LIMIT else [],
        limit=BULK_LIMIT,
        changed_from=changed_from,
        error=error,
        reason=reason,
    )
    return page, status


@requires(Role.APPROVER)
def preview() -> ResponseReturnValue:
    """How many notifications the filter matches now, and the form that confirms that count."""
    scope = scope_of(InboxFilter.read().facets_only())  # a search or a view: not for bulk
    kind = _kind(request.args.get("decision"))
    return _confirmation(scope, kind, scope.count(services().notifications))


def _decision(kind: ResolutionKind, reason: str) -> Resolution:
    raw = {"kind": kind.value} | ({"reason": reason} if kind is ResolutionKind.DENY else {})
    try:
        return RESOLUTION.validate_python(raw)
    except ValidationError as exc:
        raise InvalidInput(exc.errors()[0]["msg"].removeprefix("Value error, ")) from None


@requires(Role.APPROVER)
def confirm() -> ResponseReturnValue:
    """Applies the action if the count is still the one shown; else shows the new count."""
    form = request.form
    kind = _kind(form.get("decision"))
    inbox = InboxFilter.of(form, where="form field").facets_only()
    scope = scope_of(inbox, created_before=_number(form, "created_before", float))
    expected = _number(form, "expected_count", int)
    reason = form.get("reason", "")
    store = services().notifications
    try:
        decision = _decision(kind, reason)
        outcome = apply(
            store,
            scope,
            decision,
            expected=expected,
            actor=current_principal().name,
            check=resolve_check(),
        )
    except InvalidInput as exc:
        return _confirmation(scope, kind, expected, status=422, error=exc.message, reason=reason)
    except CountChanged as exc:
        return _confirmation(
            scope, kind, exc.current, status=409, changed_from=expected, reason=reason
        )
    summary = outcome.summary(_VERBS[kind]).removesuffix(".")
    flash(f"{summary}: {inbox.describe()}.", "info")
    if inbox.batch_id and outcome.resolved and not scope_of(inbox).count(store):
        # Nothing of the batch is left to decide here: what follows is watching it finish.
        return redirect(url_for("pages.batches.view", bid=inbox.batch_id))
    back: dict[str, Any] = inbox.query()
    return redirect(url_for("pages.approvals.inbox", **back))


def blueprint() -> Blueprint:
    bp = Blueprint("bulk", __name__)
    bp.add_url_rule("/approvals/bulk", view_func=preview, methods=["GET"])
    bp.add_url_rule("/approvals/bulk", endpoint="confirm", view_func=confirm, methods=["POST"])
    return bp
