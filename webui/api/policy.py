"""/policy: the operator's tool policy (rules, the tools they apply to, and the change log)."""

from __future__ import annotations

import logging

from flask import Blueprint, Response
from pydantic import BaseModel, ConfigDict, Field

from shared.errors import NotFound
from shared.models.users import Role
from shared.store.policy import PolicyChange, PolicyRule, TitleArguments
from webui.api.replies import reply
from webui.auth import current_principal, requires
from webui.operations import operation
from webui.params import json_body
from webui.policy.overview import PolicyView, policy_view
from webui.queries import PolicyLogQuery, RuleScopeQuery
from webui.services import services

__all__ = ["PolicyLog", "PolicyRuleBody", "blueprint"]

log = logging.getLogger(__name__)


class PolicyRuleBody(PolicyRule):
    """A rule to set, read strictly as every request body is (no `0` for false, no "2" for 2)."""

    model_config = ConfigDict(strict=True)


class PolicyLog(BaseModel):
    items: list[PolicyChange] = Field(description="Newest first.")


@requires(Role.VIEWER)
@operation("The operator's tool policy: rules and the tools they apply to", response=PolicyView)
def show() -> Response:
    policies = services().policies
    return reply(policy_view(policies.load(), policies.catalog(), policies.title_arguments()))


@requires(Role.OPERATOR)
@operation(
    "Set a rule: a tool's policy (auto, ask, deny), globally or for one batch or label",
    request=PolicyRuleBody,
    response=PolicyChange,
    errors=(400, 403, 422),
)
def set_rule() -> Response:
    rule = json_body(PolicyRuleBody)
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


@requires(Role.OPERATOR)
@operation(
    "Title a tool's requests by these arguments (one or two): "
    'send_email to ana@example.com: "Refund 120 EUR"',
    request=TitleArguments,
    response=TitleArguments,
    errors=(400, 403, 422),
)
def set_titles() -> Response:
    titles = json_body(TitleArguments)
    services().policies.set_title_arguments(titles)
    log.info("%s titled %s requests by %s", current_principal().name, titles.tool, titles.arguments)
    return reply(titles)


@requires(Role.OPERATOR)
@operation(
    "Title a tool's requests by the default arguments again (the first short string ones)",
    response=TitleArguments,
    errors=(403, 404),
)
def clear_titles(tool: str) -> Response:
    removed = services().policies.clear_title_arguments(tool)
    log.info("%s cleared the title arguments of %s", current_principal().name, tool)
    return reply(removed)


def blueprint() -> Blueprint:
    bp = Blueprint("policy", __name__)
    bp.add_url_rule("/policy", view_func=show, methods=["GET"])
    bp.add_url_rule("/policy/rules", view_func=set_rule, methods=["PUT"])
    bp.add_url_rule("/policy/rules/<tool:tool>", view_func=remove_rule, methods=["DELETE"])
    bp.add_url_rule("/policy/log", view_func=changes, methods=["GET"])
    bp.add_url_rule("/policy/titles", view_func=set_titles, methods=["PUT"])
    bp.add_url_rule("/policy/titles/<tool:tool>", view_func=clear_titles, methods=["DELETE"])
    return bp
