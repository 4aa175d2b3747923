"""Budgets at each model call: reserve the call's worst case before it, settle after it.

`reserve` runs one script (`lua/reserve.lua`) that also reads the model's price and the
provider's pause after a 429, so a call under budgets costs no more round trips than one
without: the price's HGET is this script, and the settlement rides on the flush that records
the call (`Writer.settle`). The flush before the call (the turn's start, a tool's result)
rides on the reservation (`Writer.carrying`), which checks the lease as the flush does.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from shared.models.budgets import BudgetKind
from shared.models.prices import Price
from shared.models.steps import UsageMetadata
from shared.store.budgets import BudgetStore, today
from shared.store.lua import LuaScript
from worker.context import estimate_tokens
from worker.leg import Leg
from worker.providers.base import ModelRequest
from worker.writer import LeaseLost

__all__ = ["RESERVE_SCRIPT", "SCOPES", "BudgetRefused", "Reservation", "reserve", "settlement"]

SCOPES = ("conversation", "batch", "agent", "owner")
RESERVE_SCRIPT = LuaScript(
    "worker",
    "reserve.lua",
    keys=[
        "prices",
        *(f"limit.{s}" for s in SCOPES),
        *(f"spend.{s}" for s in SCOPES),
        "pause",
        "lease",
    ],
    args=[
        "price_field",
        "prompt_tokens",
        "max_output",
        "active",
        "day_ttl_s",
        "price_given",
        "token",
    ],
)
_DAY_TTL_S = 3 * 86_400
_UNITS = {"tokens": "tokens", "micros": "cost", "unpriced": "cost"}


class BudgetRefused(Exception):
    """A budget has no room for the call's worst case; the message names the budget."""


@dataclass(frozen=True)
class Reservation:
    """What a call reserved, where, and the price it is counted at."""

    scopes: tuple[str, ...]
    spend_keys: dict[str, str]  # scope -> the hash the flush settles (a day's, for daily kinds)
    tokens: int
    micros: int
    price: Price | None
    paused_ms: int = 0  # how long the provider stays paused after a 429, read with it


def reserve(leg: Leg, request: ModelRequest) -> Reservation:
    """Reserves the call's worst case against every budget over it, or raises BudgetRefused."""
    store = BudgetStore(leg.prices.client, leg.prices.keys)
    day = today()
    names = {
        "conversation": leg.cid,
        "batch": leg.config.batch_id,
        "agent": leg.config.agent,
        "owner": leg.config.submitted_by or leg.flags.get("owner") or "-",
    }
    active = tuple(scope for scope in SCOPES if names[scope])
    limits, spends = [], []
    for scope in SCOPES:
        kind, name = BudgetKind(scope), names[scope] or leg.cid
        limits.append(store.limit_key(kind, name))
        spends.append(store.spend_key(kind, name, day))
    config = leg.config
    cap = request.settings.max_output_tokens or leg.settings.max_output_tokens or 4096
    shard = store.keys.shard_of(leg.cid)
    pause = store.keys.rate_pause_copy(config.provider, shard)
    args = [f"{config.provider}/{request.model}", estimate_tokens(request.messages), cap]
    lease = store.keys.lease(leg.cid)
    if store.keys.shards == 1:
        keys = [store.keys.prices_copy(shard), *limits, *spends, pause, lease]
        argv = [*args, json.dumps(active), _DAY_TTL_S, "", leg.writer.token]
        reply = leg.writer.carrying(RESERVE_SCRIPT, keys, argv)
    else:
        reply = _reserve_by_slot(leg, store, limits, spends, active, args, pause)
    if reply[0] == "fenced":
        raise LeaseLost(f"lease of conversation {leg.cid} was taken over; leg stopped")
    if not reply[0]:
        raise BudgetRefused(_refusal(names, *reply[1:]))
    price = None if not reply[1] else Price.model_validate_json(reply[1])
    spend_keys = {scope: spends[SCOPES.index(scope)] for scope in active}
    return Reservation(active, spend_keys, int(reply[2]), int(reply[3]), price, int(reply[4]))


def _reserve_by_slot(
    leg: Leg,
    store: BudgetStore,
    limits: list[str],
    spends: list[str],
    active: tuple[str, ...],
    args: list[Any],
    pause: str,
) -> list[Any]:
    """On a cluster: the conversation's own budget first, in its slot (reading the price and
    the pause there), then each other scope in its own slot, in the fixed order of `SCOPES`.
    A scope that refuses gives back what the earlier ones reserved; a crash in between
    leaves a reservation that its day's key expires with (a batch's stays)."""
    shard = store.keys.shard_of(leg.cid)
    conversation = limits[0]
    first = leg.writer.carrying(
        RESERVE_SCRIPT,
        [
            store.keys.prices_copy(shard),
            *[conversation] * 4,
            spends[0],
            *[conversation] * 3,
            pause,
            store.keys.lease(leg.cid),
        ],
        [*args, json.dumps(["conversation"]), _DAY_TTL_S, "", leg.writer.token],
    )
    if first[0] == "fenced" or not first[0]:
        return list(first)
    price, taken = first[1] or "none", [spends[0]]
    for scope in active[1:]:
        n = SCOPES.index(scope)
        keys = [limits[n], *_one_scope(limits[n], spends[n]), limits[n], limits[n]]
        reply = RESERVE_SCRIPT(
            leg.prices.client, keys, [*args, json.dumps([scope]), _DAY_TTL_S, price, ""]
        )
        if not reply[0]:
            _give_back(leg, taken, int(first[2]), int(first[3]))
            return list(reply)
        taken.append(spends[n])
    return list(first)


def _one_scope(limit: str, spend: str) -> list[str]:
    """reserve.lua's four limit and four spend keys for a call naming one scope active: that
    scope's keys in every place (the others are unread), so that every key is in one slot."""
    return [limit] * len(SCOPES) + [spend] * len(SCOPES)


def _give_back(leg: Leg, taken: list[str], tokens: int, micros: int) -> None:
    with leg.prices.client.pipeline(transaction=False) as pipe:
        for key in taken:
            pipe.hincrby(key, "reserved:tokens", -tokens)
            if micros:
                pipe.hincrby(key, "reserved:micros", -micros)
        pipe.execute()


def _refusal(names: dict[str, str | None], scope: str, unit: str, limit: str, used: int) -> str:
    what = f"the {scope} budget of {scope} {names[scope]!r}"
    daily = " for today (UTC)" if BudgetKind(scope).daily else ""
    if unit == "unpriced":
        return f"{what}{daily} is in money, and this model has no price: no call is counted"
    if unit == "micros":
        spent = f"{int(used) / 1_000_000:g} of {int(limit) / 1_000_000:g}"
    else:
        spent = f"{used} of {limit} tokens"
    return f"{what}{daily} has no room for this call: {spent} spent or reserved ({_UNITS[unit]})"


def settlement(reservation: Reservation, usage: UsageMetadata | None) -> dict[str, object]:
    """The flush's `settle`: the reservation released, the call's real usage spent."""
    used = usage or UsageMetadata()
    return {
        "scopes": list(reservation.scopes),
        "reserved_tokens": reservation.tokens,
        "reserved_micros": reservation.micros,
        "tokens": used.prompt_token_count + used.candidates_token_count,
        "micros": used.cost_micros,
    }
