"""/policy: the operator's tool policy (rules, the tools they apply to, and the change log)."""

from __future__ import annotations

import logging

from flask import Blueprint, Response
from pydantic import BaseModel, Field

from shared.errors import NotFound
from shared.store.policy import PolicyChange, PolicyRule
from shared.store.users import Role
from webui.api.replies import reply
from webui.auth import current_principal, requires
from webui.operations import operation
from webui.params import json_body
from webui.policy_overview import PolicyView, policy_view
from webui.queries import PolicyLogQuery, RuleScopeQuery
from webui.services import services

__all__ = ["PolicyLog", "blueprint"]

log = logging.getLogger(__name__)


class PolicyLog(BaseModel):
    items: list[PolicyChange] = Field(description="Newest first.")


@requires(Role.VIEWER)
@operation("The operator's tool policy: rules and the tools they apply to", response=PolicyView)
def show() -> Response:
    policies = services().policies
    return reply(policy_view(policies.load(), policies.catalog()))


@requires(Role.OPERATOR)
@operation(
    "Set a rule: a tool's policy (auto, ask, deny), globally or for one batch or label",
    request=PolicyRule,
    response=PolicyChange,
    errors=(400, 403, 422),
)
def set_rule() -> Response:
    rule = json_body(PolicyRule)
    actor = current_principal().name
    change = services().policies.set(rule, actor=actor)
    log.info("%s set tool policy %s in %s: %s", actor, rule.tool, rule.scope, rule.policy.value)
    return reply(change)


@requires(Role.OPERATOR)
@operation(
    "Remove a rule (the tool falls back to a wider rule or its default)",
    response=PolicyChange,
    query=RuleScopeQuery,
    errors=(400, 403, 404),
)
def remove_rule(tool: str) -> Response:
    scope = RuleScopeQuery.read()
    if scope.batch_id is not None and scope.label is not None:
        raise NotFound("no rule is scoped by both a batch and a label: give batch_id or label")
    actor = current_principal().name
    change = services().policies.remove(
        tool, batch_id=scope.batch_id, label=scope.label, actor=actor
    )
    log.info("%s removed tool policy %s in %s", actor, tool, change.scope)
    return reply(change)


@requires(Role.VIEWER)
@operation("Who changed the tool policy, when, and how", response=PolicyLog, query=PolicyLogQuery)
def changes() -> Response:
    limit = PolicyLogQuery.read().limit
    return reply(PolicyLog(items=services().policies.changes(limit=limit)))


def blueprint() -> Blueprint:
    bp = Blueprint("policy", __name__)
    bp.add_url_rule("/policy", view_func=show, methods=["GET"])
    bp.add_url_rule("/policy/rules", view_func=set_rule, methods=["PUT"])
    bp.add_url_rule("/policy/rules/<tool:tool>", view_func=remove_rule, methods=["DELETE"])
    bp.add_url_rule("/policy/log", view_func=changes, methods=["GET"])
    return bp
