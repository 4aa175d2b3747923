"""Budgets' limits and what is spent against them, in the hashes the worker's scripts read.

A conversation's and a batch's limits and counters live in their own hash (`limit:<unit>`,
`spent:<unit>`, `reserved:<unit>`; units `tokens` and `micros`), so the batch's dispatch
script sees its budget without another key. An agent's or an owner's limits live in
`budget:<kind>:<name>`, and each UTC day's counters in `budget:<kind>:<name>:day:<day>`.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterable
from typing import Any

import redis

from shared.errors import NotFound
from shared.models.budgets import Budget, BudgetKind, BudgetSpec, BudgetUnit
from shared.store.connection import storage_errors
from shared.store.keys import KeySpace
from shared.store.lua import LuaScript

__all__ = ["BudgetStore", "today"]

_SET = LuaScript(
    "shared.store", "budget_set.lua", keys=["limits"], args=["must_exist", "limits", "is_batch"]
)
_UNITS = (BudgetUnit.TOKENS.value, BudgetUnit.MICROS.value)


def today() -> str:
    """The UTC day daily budgets count."""
    return time.strftime("%Y-%m-%d", time.gmtime())


class BudgetStore:
    """Sets, reads and removes budgets; the worker reserves and settles against them."""

    def __init__(
        self,
        client: redis.Redis,
        keys: KeySpace,
        dispatch: Callable[[str], object] | None = None,
    ) -> None:
        self.client = client
        self.keys = keys
        self._dispatch = dispatch  # a batch's dispatch, which a raised budget resumes

    def limit_key(self, kind: BudgetKind, name: str) -> str:
        if kind is BudgetKind.CONVERSATION:
            return self.keys.conversation(name)
        if kind is BudgetKind.BATCH:
            return self.keys.batch(name)
        return self.keys.budget(kind.value, name)

    def spend_key(self, kind: BudgetKind, name: str, day: str) -> str:
        if kind.daily:
            return self.keys.budget_day(kind.value, name, day)
        return self.limit_key(kind, name)

    def set(self, kind: BudgetKind, name: str, spec: BudgetSpec | None) -> None:
        """Sets the limits (None removes them); NotFound for a conversation or batch that
        does not exist."""
        limits = {} if spec is None else {unit.value: v for unit, v in spec.limits().items()}
        must_exist = "0" if kind.daily else "1"
        with storage_errors(f"setting the budget of {kind.value} {name}"):
            is_batch = "1" if kind is BudgetKind.BATCH else "0"
            args = [must_exist, json.dumps(limits), is_batch]
            done = _SET(self.client, [self.limit_key(kind, name)], args)
        if not done:
            raise NotFound(f"{kind.value} {name} does not exist")
        if kind is BudgetKind.BATCH and self._dispatch is not None:
            self._dispatch(name)

    def get(self, kind: BudgetKind, name: str, day: str | None = None) -> Budget:
        """The limits and today's (or the whole) spending; NotFound when no limit is set."""
        day = day or today()
        with (
            storage_errors(f"reading the budget of {kind.value} {name}"),
            self.client.pipeline(transaction=True) as pipe,
        ):
            pipe.hmget(self.limit_key(kind, name), [f"limit:{u}" for u in _UNITS])
            fields = [f"{what}:{u}" for what in ("spent", "reserved") for u in _UNITS]
            pipe.hmget(self.spend_key(kind, name, day), fields)
            limits, counters = pipe.execute()
        if limits == [None, None]:
            raise NotFound(f"{kind.value} {name} has no budget")
        spent_t, spent_m, reserved_t, reserved_m = (int(v or 0) for v in counters)
        return Budget(
            kind=kind,
            name=name,
            tokens=_int(limits[0]),
            cost=None if limits[1] is None else int(limits[1]) / 1_000_000,
            spent_tokens=spent_t,
            spent_cost=spent_m / 1_000_000,
            reserved_tokens=reserved_t,
            reserved_cost=reserved_m / 1_000_000,
            day=day if kind.daily else None,
        )


def _int(raw: Any) -> int | None:
    return None if raw is None else int(raw)


def settle_apart(client: Any, settlement: dict[str, Any], spend_keys: Iterable[str]) -> None:
    """On a cluster, settles a model call's reservation in the budgets outside its
    conversation's slot (the flush settles the conversation's): each key's reservation given
    back and the call's real usage spent, one pipeline, after the flush."""
    changes = {
        "reserved:tokens": -int(settlement["reserved_tokens"]),
        "reserved:micros": -int(settlement["reserved_micros"]),
        "spent:tokens": int(settlement["tokens"]),
        "spent:micros": int(settlement["micros"]),
    }
    with (
        storage_errors("settling a model call's budgets"),
        client.pipeline(transaction=False) as pipe,
    ):
        for key in spend_keys:
            for field, change in changes.items():
                if change:
                    pipe.hincrby(key, field, change)
        pipe.execute()
