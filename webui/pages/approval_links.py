"""Signed approval links: a GET shows the request and a confirmation form, never resolves;
the form's POST uses the link once, as the approver it names (signed in), within its role,
scopes and separation of duties."""

from __future__ import annotations

from flask import Blueprint, flash, redirect, render_template, request, url_for
from flask.typing import ResponseReturnValue

from shared.approval_links import LinkClaims, LinkExpired
from shared.errors import InvalidInput
from shared.models.notifications import Allow as AllowDecision
from shared.models.notifications import Deny, Resolution
from shared.models.users import Role
from webui.approvals.access import resolve as resolve_as_caller
from webui.approvals.rows import inbox_rows
from webui.approvals.titles import decided
from webui.auth import current_principal, requires
from webui.errors import HttpProblem
from webui.services import services

__all__ = ["blueprint"]


def _claims(token: str, *, use: bool) -> LinkClaims:
    """The link's claims for the caller (and, with `use`, the link spent); 410 when expired."""
    links, caller = services().links, current_principal().name
    try:
        return links.use(token, caller) if use else links.check(token, caller)
    except LinkExpired as exc:
        raise HttpProblem(410, exc.code, exc.message) from None


@requires(Role.APPROVER)
def confirm(token: str) -> ResponseReturnValue:
    """The request and the form that decides it: opening a link changes nothing."""
    claims = _claims(token, use=False)
    note = services().notifications.get(claims.nid)
    return render_template("approval_link.html", note=note, claims=claims, token=token)


def _decision() -> Resolution:
    chosen = request.form.get("decision", "")
    if chosen == "allow":
        return AllowDecision()
    if chosen == "deny":
        reason = request.form.get("reason", "").strip()
        if not reason:
            raise InvalidInput("reason: a denial needs a reason (the model is told it)")
        return Deny(reason=reason)
    raise InvalidInput(f"decision must be allow or deny, not {chosen[:20]!r}")


@requires(Role.APPROVER)
def decide(token: str) -> ResponseReturnValue:
    """Uses the link once and resolves as its approver."""
    decision = _decision()  # a bad form spends nothing
    claims = _claims(token, use=True)
    note = resolve_as_caller(claims.nid, decision)
    item = inbox_rows(services().store, [note])[0].item_id
    flash(decided(decision.kind, note, item).removesuffix(".") + ", through the link.", "info")
    return redirect(url_for("pages.approvals.detail", nid=claims.nid))


def blueprint() -> Blueprint:
    bp = Blueprint("approval_links", __name__)
    bp.add_url_rule("/approve/<token>", view_func=confirm, methods=["GET"])
    bp.add_url_rule("/approve/<token>", endpoint="decide", view_func=decide, methods=["POST"])
    return bp
