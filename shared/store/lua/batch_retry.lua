-- Queues ended items again as new attempts (BatchRetry), each only if it is still where the
-- caller saw it: in `state` (an end), filed at `index` with its old conversation. Its old
-- conversation leaves the batch's states (a late transition of it changes nothing), the new
-- one is queued, the counts move with it, and a done or cancelled batch runs again.
-- KEYS[1] meta: HASH, the batch
-- KEYS[2] states: HASH, conversation id -> its item's state
-- KEYS[3] queue: LIST, items waiting for a first place
-- KEYS[4] items: LIST, the items (JSON), in order
-- KEYS[5] ids: HASH, item id -> conversation id
-- ARGV[1] moves: JSON, a list of {index, old, state, new, item (JSON), item_id, denied}
-- ARGV[2] round: this retry's number (the batch's `retries` once it queued anything)
-- Returns how many items were queued again.
local ends = {done = true, failed = true, cancelled = true}
local moved = 0
for _, move in ipairs(moves) do
  local filed = redis.call('LINDEX', items_key, move.index)
  if ends[move.state] and redis.call('HGET', states_key, move.old) == move.state
     and filed and cjson.decode(filed).conversation_id == move.old then
    redis.call('HDEL', states_key, move.old)
    redis.call('HSET', states_key, move.new, 'queued')
    redis.call('HINCRBY', meta_key, 'count:' .. move.state, -1)
    redis.call('HINCRBY', meta_key, 'count:queued', 1)
    if move.denied and tonumber(redis.call('HGET', meta_key, 'denied') or '0') > 0 then
      redis.call('HINCRBY', meta_key, 'denied', -1)
    end
    redis.call('LSET', items_key, move.index, move.item)
    redis.call('HSET', ids_key, move.item_id, move.new)
    redis.call('RPUSH', queue_key, move.new)
    moved = moved + 1
  end
end
if moved > 0 then
  redis.call('HSET', meta_key, 'retries', round)
  local status = redis.call('HGET', meta_key, 'status')
  if status == 'done' or status == 'cancelled' then
    redis.call('HSET', meta_key, 'status', 'running')
    redis.call('HDEL', meta_key, 'finished_at')
  end
end
return moved
