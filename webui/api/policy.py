"""/policy: the operator's tool policy (rules, the tools they apply to, and the change log)."""

from __future__ import annotations

import logging
import re

from flask import Blueprint, Response, request
from pydantic import BaseModel, Field

from shared.config import LABEL_PATTERN
from shared.errors import NotFound
from shared.keys import ID_PATTERN
from shared.policy import PolicyChange, PolicyRule
from shared.users import Role
from webui.api.replies import reply
from webui.auth import current_principal, requires
from webui.errors import HttpProblem
from webui.operations import Param, integer, operation
from webui.params import json_body
from webui.policy_overview import PolicyView, policy_view
from webui.services import services

__all__ = ["PolicyLog", "blueprint"]

log = logging.getLogger(__name__)

# An empty scope is refused, not read as "no scope": it would remove the global rule.
BATCH = Param(
    "batch_id",
    {"type": "string", "pattern": f"^{ID_PATTERN}$"},
    "The rule's batch, if scoped (not with `label`: no rule has both, so that is a 404).",
    allow_empty=False,
)
LABEL = Param(
    "label",
    {"type": "string", "pattern": LABEL_PATTERN},
    "The rule's label, if scoped.",
    allow_empty=False,
)
LOG_LIMIT = integer("limit", "Entries.", default=100, low=1, high=500)


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


def _optional(name: str, pattern: str) -> str | None:
    raw = request.args.get(name)
    if raw is None:
        return None
    if not re.fullmatch(pattern.strip("^$"), raw):
        raise HttpProblem(400, "bad_request", f"query parameter {name!r} has a bad value")
    return raw


@requires(Role.OPERATOR)
@operation(
    "Remove a rule (the tool falls back to a wider rule or its default)",
    response=PolicyChange,
    params=(BATCH, LABEL),
    errors=(400, 403, 404),
)
def remove_rule(tool: str) -> Response:
    batch_id = _optional("batch_id", ID_PATTERN)
    label = _optional("label", LABEL_PATTERN)
    if batch_id is not None and label is not None:
        raise NotFound("no rule is scoped by both a batch and a label: give batch_id or label")
    actor = current_principal().name
    change = services().policies.remove(tool, batch_id=batch_id, label=label, actor=actor)
    log.info("%s removed tool policy %s in %s", actor, tool, change.scope)
    return reply(change)


@requires(Role.VIEWER)
@operation("Who changed the tool policy, when, and how", response=PolicyLog, params=(LOG_LIMIT,))
def changes() -> Response:
    return reply(PolicyLog(items=services().policies.changes(limit=LOG_LIMIT.integer())))


def blueprint() -> Blueprint:
    bp = Blueprint("policy", __name__)
    bp.add_url_rule("/policy", view_func=show, methods=["GET"])
    bp.add_url_rule("/policy/rules", view_func=set_rule, methods=["PUT"])
    bp.add_url_rule("/policy/rules/<tool:tool>", view_func=remove_rule, methods=["DELETE"])
    bp.add_url_rule("/policy/log", view_func=changes, methods=["GET"])
    return bp
