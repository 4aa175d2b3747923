"""/prices: what each provider's model costs per million tokens; operators write, all read."""

from __future__ import annotations

import logging

from flask import Blueprint, Response
from pydantic import BaseModel, ConfigDict

from shared.models.prices import Price, PriceSpec
from shared.models.users import Role
from webui.api.replies import reply
from webui.auth import current_principal, requires
from webui.operations import operation
from webui.params import json_body
from webui.services import services

__all__ = ["PriceList", "PriceSpecBody", "blueprint"]

log = logging.getLogger(__name__)


class PriceSpecBody(PriceSpec):
    """A model's prices per million tokens (a cached input price of null: the input price)."""

    model_config = ConfigDict(extra="forbid", strict=True, allow_inf_nan=False)


class PriceList(BaseModel):
    items: list[Price]


@requires(Role.VIEWER)
@operation("Every model's price, by provider and model", response=PriceList)
def list_prices() -> Response:
    return reply(PriceList(items=services().stores.prices.list()))


@requires(Role.OPERATOR)
@operation(
    "Set a model's price; it applies from the next model call (past costs stay as they were)",
    request=PriceSpecBody,
    response=Price,
    errors=(400, 404, 422),  # 404: a provider or model name no price can have
)
def set_price(provider: str, model: str) -> Response:
    body = json_body(PriceSpecBody)
    actor = current_principal().name
    price = services().stores.prices.set(provider, model, body, actor=actor)
    log.info("%s set the price of %s/%s", actor, provider, model)
    return reply(price)


@requires(Role.OPERATOR)
@operation(
    "Remove a model's price: its next calls count tokens and 'no price'; answers the old price",
    response=Price,
    errors=(404,),
)
def unset_price(provider: str, model: str) -> Response:
    removed = services().stores.prices.unset(provider, model)
    log.info("%s removed the price of %s/%s", current_principal().name, provider, model)
    return reply(removed)


def blueprint() -> Blueprint:
    bp = Blueprint("prices", __name__)
    bp.add_url_rule("/prices", view_func=list_prices, methods=["GET"])
    rule = "/prices/<id:provider>/<model:model>"
    bp.add_url_rule(rule, view_func=set_price, methods=["PUT"])
    bp.add_url_rule(rule, view_func=unset_price, methods=["DELETE"])
    return bp
