-- cancel_queued(conv, inbox, events, maxlen, ttl, channels, cid, reason, now): ends a
-- conversation's queued turns (they never started, so no worker ends them), each with its
-- `cancelled` event, and empties the inbox. Returns how many it ended.
local function cancel_queued(conv, inbox, events, maxlen, ttl, channels, cid, reason, now)
  local turns = redis.call('LRANGE', inbox, 0, -1)
  for _, tid in ipairs(turns) do
    local turn_key = string.gsub(inbox, ':inbox$', ':turn:' .. tid)
    redis.call('HSET', turn_key, 'status', 'cancelled', 'finished_at', now, 'error', reason)
    emit(events, maxlen, ttl, channels, cjson.encode(
      {kind = 'cancelled', conversation_id = cid, turn_id = tid, reason = reason}))
  end
  redis.call('DEL', inbox)
  return #turns
end
