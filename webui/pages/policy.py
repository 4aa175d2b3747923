"""The tool policy page: every tool's policy, the rules, and who changed them."""

from __future__ import annotations

from flask import Blueprint, flash, redirect, render_template, request, url_for
from flask.typing import ResponseReturnValue
from pydantic import ValidationError

from shared.errors import SignoffError
from shared.models.config import ToolPolicy
from shared.models.users import Role
from shared.store.policy import PolicyRule, TitleArguments
from webui.auth import current_principal, requires
from webui.pages.flashing import flash_refusal
from webui.policy.overview import policy_view
from webui.services import services

__all__ = ["blueprint"]


@requires(Role.VIEWER)
def index() -> ResponseReturnValue:
    policies = services().policies
    return render_template(
        "policy.html",
        view=policy_view(policies.load(), policies.catalog(), policies.title_arguments()),
        changes=policies.changes(limit=50),
        choices=list(ToolPolicy),
    )


# The form's "creator may approve" choice: `separation` of the rule.
_SEPARATION = {"on": True, "off": False}


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
            approvals=int(request.form.get("approvals", "") or 1),
            separation=_SEPARATION.get(request.form.get("separation", "")),
            **_scope(),
        )
    except (ValidationError, ValueError) as exc:
        flash(f"Not saved: {_problem(exc)}", "error")
        return redirect(url_for(".index"))
    services().policies.set(rule, actor=current_principal().name)
    quorum = f", {rule.approvals} approvals" if rule.approvals > 1 else ""
    flash(f"{rule.tool}: {rule.policy.value} in {rule.scope}{quorum}.", "info")
    return redirect(url_for(".index"))


@requires(Role.OPERATOR)
def remove_rule() -> ResponseReturnValue:
    tool = request.form.get("tool", "")
    with flash_refusal():
        change = services().policies.remove(tool, **_scope(), actor=current_principal().name)
        flash(f"Rule removed: {tool} in {change.scope}.", "info")
    return redirect(url_for(".index"))


@requires(Role.OPERATOR)
def set_titles() -> ResponseReturnValue:
    """The arguments that title a tool's requests; none named: the default ones again."""
    tool = request.form.get("tool", "")
    names = request.form.get("arguments", "").replace(",", " ").split()
    policies = services().policies
    try:
        if names:
            policies.set_title_arguments(TitleArguments(tool=tool, arguments=names))
        else:
            policies.clear_title_arguments(tool)
    except ValidationError as exc:
        flash(f"Not saved: {_problem(exc)}", "error")
        return redirect(url_for(".index"))
    except SignoffError:
        pass  # no choice to clear: the default already applies
    shown = ", ".join(names) if names else "the first short string arguments"
    flash(f"{tool} requests are titled by {shown}.", "info")
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
    bp.add_url_rule("/policy/titles", view_func=set_titles, methods=["POST"])
    return bp
