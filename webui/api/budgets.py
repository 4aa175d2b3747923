"""/budgets: what a conversation, a batch, an agent or an owner may spend; operators write."""

from __future__ import annotations

import logging

from flask import Blueprint, Response
from pydantic import ConfigDict

from shared.errors import NotFound
from shared.models.budgets import Budget, BudgetKind, BudgetSpec
from shared.models.users import Role
from webui.api.replies import reply
from webui.auth import current_principal, requires
from webui.operations import operation
from webui.params import json_body
from webui.services import services

__all__ = ["BudgetSpecBody", "blueprint"]

log = logging.getLogger(__name__)


class BudgetSpecBody(BudgetSpec):
    """Tokens, money (in the prices' currency) or both; agent and owner budgets are per day."""

    model_config = ConfigDict(extra="forbid", strict=True, allow_inf_nan=False)


def _kind(kind: str) -> BudgetKind:
    try:
        return BudgetKind(kind)
    except ValueError:
        known = ", ".join(k.value for k in BudgetKind)
        raise NotFound(f"no budget kind {kind[:40]!r}; kinds: {known}") from None


@requires(Role.VIEWER)
@operation("A budget: its limits, and what is spent and reserved", response=Budget, errors=(404,))
def get_budget(kind: str, name: str) -> Response:
    return reply(services().stores.budgets.get(_kind(kind), name))


@requires(Role.OPERATOR)
@operation(
    "Set a budget; a batch held by its budget goes on when the new one has room",
    request=BudgetSpecBody,
    response=Budget,
    errors=(400, 404, 422),
)
def set_budget(kind: str, name: str) -> Response:
    found, body = _kind(kind), json_body(BudgetSpecBody)
    store = services().stores.budgets
    store.set(found, name, body)
    log.info("%s set the budget of %s %s", current_principal().name, kind, name)
    return reply(store.get(found, name))


@requires(Role.OPERATOR)
@operation("Remove a budget; answers it as it was", response=Budget, errors=(404,))
def unset_budget(kind: str, name: str) -> Response:
    found = _kind(kind)
    store = services().stores.budgets
    was = store.get(found, name)
    store.set(found, name, None)
    log.info("%s removed the budget of %s %s", current_principal().name, kind, name)
    return reply(was)


def blueprint() -> Blueprint:
    bp = Blueprint("budgets", __name__)
    rule = "/budgets/<kind>/<name>"
    bp.add_url_rule(rule, view_func=get_budget, methods=["GET"])
    bp.add_url_rule(rule, view_func=set_budget, methods=["PUT"])
    bp.add_url_rule(rule, view_func=unset_budget, methods=["DELETE"])
    return bp
