"""The Lua scripts of a batch: each runs on the batch's keys only (one hash tag, one slot).

Creation, the filing of one item, and every change of an item's state are each one
script, so none of them can be cut in half; what they cannot write (the conversations,
in their own slots) `shared.store.batches` writes next, in an order that a retry completes.
"""

from __future__ import annotations

from shared.store.lua import LuaScript

__all__ = ["CREATE", "REGISTER", "TRANSITION"]

# KEYS: meta   ARGV: config JSON, status, max_concurrency, created_at, created_by
# A batch's record in one step, so a creation cut short leaves either all of it or nothing.
CREATE = LuaScript(
    """
if redis.call('HSETNX', KEYS[1], 'config', ARGV[1]) == 0 then return 0 end
redis.call('HSET', KEYS[1], 'status', ARGV[2], 'max_concurrency', ARGV[3], 'total', 0,
           'created_at', ARGV[4], 'created_by', ARGV[5])
return 1
"""
)

# KEYS: meta, states, queue, releasing
# ARGV: conversation id, new state, then five usage counts or none, then '1' when a terminal
# item had a tool call denied (counted once, with the move that ends the item)
# Dispatches queued items while fewer than the cap run: each is marked running and put in
# `releasing` until its conversation's hold is released (outside this script: another slot).
# Returns every conversation id still to release: those dispatched now, and any that an
# earlier caller dispatched but did not confirm released (it died, or Redis went away).
TRANSITION = LuaScript(
    """
local meta, states, queue, releasing = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
local cid, new = ARGV[1], ARGV[2]
local terminal = {done = true, failed = true, cancelled = true, invalid = true}
local old = redis.call('HGET', states, cid)
if old and old ~= new and not terminal[old] then
  redis.call('HSET', states, cid, new)
  redis.call('HINCRBY', meta, 'count:' .. old, -1)
  redis.call('HINCRBY', meta, 'count:' .. new, 1)
  if terminal[new] and ARGV[3] then
    local fields = {'prompt_token_count', 'candidates_token_count', 'total_token_count',
                    'cached_content_token_count', 'thoughts_token_count'}
    for i, f in ipairs(fields) do redis.call('HINCRBY', meta, 'usage:' .. f, ARGV[2 + i]) end
    if ARGV[8] == '1' then redis.call('HINCRBY', meta, 'denied', 1) end
  end
  if old == 'queued' then redis.call('LREM', queue, 1, cid) end
  if old == 'running' then redis.call('SREM', releasing, cid) end
end
local status = redis.call('HGET', meta, 'status')
if status ~= 'cancelled' then
  local cap = tonumber(redis.call('HGET', meta, 'max_concurrency') or '1')
  while tonumber(redis.call('HGET', meta, 'count:running') or '0') < cap do
    local next_id = redis.call('LPOP', queue)
    if not next_id then break end
    redis.call('HSET', states, next_id, 'running')
    redis.call('HINCRBY', meta, 'count:queued', -1)
    redis.call('HINCRBY', meta, 'count:running', 1)
    redis.call('SADD', releasing, next_id)
  end
end
local finished = 0
for state, _ in pairs(terminal) do
  finished = finished + tonumber(redis.call('HGET', meta, 'count:' .. state) or '0')
end
if status == 'running' and finished >= tonumber(redis.call('HGET', meta, 'total') or '0') then
  redis.call('HSET', meta, 'status', 'done', 'finished_at', redis.call('TIME')[1])
end
if status == 'cancelled' then return {} end
return redis.call('SMEMBERS', releasing)
"""
)

# KEYS: meta, states, queue, items, ids
# ARGV: conversation id, item JSON, state, item id, whether to queue it for dispatch ('1'/'0')
# Files one item in its batch all at once, the dispatch queue last: an item is never
# dispatched half filed. Returns its index in the items list, plus one.
REGISTER = LuaScript(
    """
local meta, states, queue, items, ids = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5]
local cid, item, state, item_id = ARGV[1], ARGV[2], ARGV[3], ARGV[4]
local length = redis.call('RPUSH', items, item)
redis.call('HSET', ids, item_id, cid)
redis.call('HSET', states, cid, state)
redis.call('HINCRBY', meta, 'count:' .. state, 1)
redis.call('HINCRBY', meta, 'total', 1)
if ARGV[5] == '1' then redis.call('RPUSH', queue, cid) end
return length
"""
)
