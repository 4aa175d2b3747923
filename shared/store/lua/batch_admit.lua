-- A waiting item whose approval is settled asks for a place before its turn goes on
-- (BatchStore.admit): it joins `resuming` (once), behind earlier resumed items and ahead of
-- every queued one, and the dispatch runs; batch_dispatch.lua runs before it.
-- KEYS[1] meta: HASH, the batch
-- KEYS[2] states: HASH, conversation id -> its item's state
-- KEYS[3] queue: LIST, items waiting for a first place
-- KEYS[4] releasing: SET, dispatched items whose conversation is not yet released
-- KEYS[5] resuming: LIST, waiting items whose approval is settled
-- ARGV[1] cid: the item's conversation id
-- Returns {1 when the item holds a place now (running, or not an item waiting: nothing to
-- hold it to), the other conversations to release}.
if redis.call('HGET', states_key, cid) ~= 'waiting'
   or redis.call('HGET', meta_key, 'status') == 'cancelled' then
  return {1, {}}
end
if not redis.call('LPOS', resuming_key, cid) then redis.call('RPUSH', resuming_key, cid) end
dispatch(meta_key, states_key, queue_key, releasing_key, resuming_key)
local placed = 0
if redis.call('HGET', states_key, cid) == 'running' then  -- the caller goes on: no release
  placed = 1
  redis.call('SREM', releasing_key, cid)
end
return {placed, redis.call('SMEMBERS', releasing_key)}
