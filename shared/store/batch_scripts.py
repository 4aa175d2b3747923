"""The Lua scripts of a batch: each runs on the batch's keys only (one hash tag, one slot).

Creation, the filing of one item, and every change of an item's state are each one
script, so none of them can be cut in half; what they cannot write (the conversations,
in their own slots) `shared.store.batches` writes next, in an order that a retry completes.
The scripts are `shared/store/lua/batch_*.lua`.
"""

from __future__ import annotations

from shared.models.steps import USAGE_FIELDS
from shared.store.lua import LuaScript, lua_source

__all__ = ["ADMIT", "CREATE", "DISPATCH_KEYS", "REGISTER", "RETRY", "TRANSITION"]

# The keys of the scripts that dispatch (`BatchStore.dispatch_keys`), in order.
DISPATCH_KEYS = ("meta", "states", "queue", "releasing", "resuming")
_DISPATCH = lua_source("shared.store", "batch_dispatch.lua")

CREATE = LuaScript(
    "shared.store",
    "batch_create.lua",
    keys=["meta"],
    args=["config", "status", "max_concurrency", "created_at", "created_by", "source"],
)
TRANSITION = LuaScript(
    "shared.store",
    "batch_transition.lua",
    keys=DISPATCH_KEYS,
    args=["cid", "new", "usage", "denied"],
    uses=[_DISPATCH],
    consts={"usage_counters": USAGE_FIELDS},
)
ADMIT = LuaScript(
    "shared.store", "batch_admit.lua", keys=DISPATCH_KEYS, args=["cid"], uses=[_DISPATCH]
)
REGISTER = LuaScript(
    "shared.store",
    "batch_register.lua",
    keys=["meta", "states", "queue", "items", "ids"],
    args=["cid", "item", "state", "item_id", "to_queue"],
)
RETRY = LuaScript(
    "shared.store",
    "batch_retry.lua",
    keys=["meta", "states", "queue", "items", "ids"],
    args=["moves", "round"],
    decode=["moves"],
)
