-- Moves one item of a batch (BatchStore.transition), then dispatches while fewer than the
-- cap run; batch_dispatch.lua runs before it.
-- KEYS[1] meta: HASH, the batch
-- KEYS[2] states: HASH, conversation id -> its item's state
-- KEYS[3] queue: LIST, items waiting for a first place
-- KEYS[4] releasing: SET, dispatched items whose conversation is not yet released
-- KEYS[5] resuming: LIST, waiting items whose approval is settled
-- ARGV[1] cid: the item's conversation id
-- ARGV[2] new: its new state
-- ARGV[3] usage: JSON, its usage by counter (`usage_counters`), counted with the move that
--   ends the item ('' for none)
-- ARGV[4] denied: '1' when a terminal item had a tool call denied (counted once, likewise)
-- Returns every conversation id still to release: those dispatched now, and any that an
-- earlier caller dispatched but did not confirm released (it died, or Redis went away).
local meta, states, queue, releasing, resuming = meta_key, states_key, queue_key, releasing_key,
  resuming_key
local terminal = {done = true, failed = true, cancelled = true, invalid = true}
local old = redis.call('HGET', states, cid)
if old and old ~= new and not terminal[old] then
  redis.call('HSET', states, cid, new)
  redis.call('HINCRBY', meta, 'count:' .. old, -1)
  redis.call('HINCRBY', meta, 'count:' .. new, 1)
  if terminal[new] and usage ~= '' then
    local counts = cjson.decode(usage)
    for _, f in ipairs(usage_counters) do redis.call('HINCRBY', meta, 'usage:' .. f, counts[f]) end
    if denied == '1' then redis.call('HINCRBY', meta, 'denied', 1) end
  end
  if old == 'queued' then redis.call('LREM', queue, 1, cid) end
  if old == 'waiting' then redis.call('LREM', resuming, 1, cid) end
  if old == 'running' then redis.call('SREM', releasing, cid) end
end
local status = redis.call('HGET', meta, 'status')
dispatch(meta, states, queue, releasing, resuming)
local finished = 0
for state, _ in pairs(terminal) do
  finished = finished + tonumber(redis.call('HGET', meta, 'count:' .. state) or '0')
end
if status == 'running' and finished >= tonumber(redis.call('HGET', meta, 'total') or '0') then
  redis.call('HSET', meta, 'status', 'done', 'finished_at', redis.call('TIME')[1])
end
if status == 'cancelled' then return {} end
return redis.call('SMEMBERS', releasing)
