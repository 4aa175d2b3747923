"""The tool policy page: every tool's policy, the rules, and who changed them."""

from __future__ import annotations

from flask import Blueprint, flash, redirect, render_template, request, url_for
from flask.typing import ResponseReturnValue
from pydantic import ValidationError

from shared.errors import SignoffError
from shared.models.config import ToolPolicy
from shared.store.policy import PolicyRule
from shared.store.users import Role
from webui.auth import current_principal, requires
from webui.policy_overview import policy_view
from webui.services import services

__all__ = ["blueprint"]


@requires(Role.VIEWER)
def index() -> ResponseReturnValue:
    policies = services().policies
    return render_template(
        "policy.html",
        view=policy_view(policies.load(), policies.catalog()),
        changes=policies.changes(limit=50),
        choices=list(ToolPolicy),
    )


def _scope() -> dict[str, str]:
    """The form's scope: batch or label, from one select and one text field."""
    kind, value = request.form.get("scope", "global"), request.form.get("scope_value", "").strip()
    if kind == "batch":
        return {"batch_id": value}
    if kind == "label":
        return {"label": value}
    return {}


@requires(Role.OPERATOR)
def set_rule() -> ResponseReturnValue:
    try:
        rule = PolicyRule(
            tool=request.form.get("tool", ""),
            policy=ToolPolicy(request.form.get("policy", "")),
            **_scope(),
        )
    except (ValidationError, ValueError) as exc:
        flash(f"Not saved: {_problem(exc)}", "error")
        return redirect(url_for(".index"))
    services().policies.set(rule, actor=current_principal().name)
    flash(f"{rule.tool}: {rule.policy.value} in {rule.scope}.", "info")
    return redirect(url_for(".index"))


@requires(Role.OPERATOR)
def remove_rule() -> ResponseReturnValue:
    tool = request.form.get("tool", "")
    try:
        change = services().policies.remove(tool, **_scope(), actor=current_principal().name)
        flash(f"Rule removed: {tool} in {change.scope}.", "info")
    except SignoffError as exc:
        flash(exc.message, "error")
    return redirect(url_for(".index"))


def _problem(exc: Exception) -> str:
    if isinstance(exc, ValidationError):
        return "; ".join(
            f"{'.'.join(str(p) for p in e['loc']) or 'rule'}: {e['msg']}" for e in exc.errors()
        )
    return "the policy must be auto, ask or deny"


def blueprint() -> Blueprint:
    bp = Blueprint("policy", __name__)
    bp.add_url_rule("/policy", view_func=index)
    bp.add_url_rule("/policy/rules", view_func=set_rule, methods=["POST"])
    bp.add_url_rule("/policy/rules/remove", view_func=remove_rule, methods=["POST"])
    return bp
