-- The worker's flush (worker/writer.py): one fenced round trip that writes what a turn did.
-- Runs after shared/store/lua/emit.lua, history_write.lua and webhook_outbox.lua, whose
-- functions it calls.
-- Returns {'fenced'} when another worker holds the lease (nothing is written), else
-- {'ok', position of the first step appended, 1 if abort was asked for this turn, event ids,
--  1 if a turn's end let the lease go}.
-- KEYS[1] lease: STRING, the lease's fencing token
-- KEYS[2] conversation: HASH
-- KEYS[3] turn: HASH, the running turn
-- KEYS[4] events: STREAM, the conversation's events
-- KEYS[5] tool_results: HASH
-- KEYS[6] notification: HASH, the notification the flush files (the turn's key again when none)
-- KEYS[7] deliveries: STREAM, the conversation's notification deliveries
-- KEYS[8] history.steps: the history's keys (HISTORY_KEYS), for history_write
-- KEYS[9] history.meta
-- KEYS[10] history.turn_starts
-- KEYS[11] history.compactions
-- KEYS[12] history.usage
-- KEYS[13] history.overflow
-- KEYS[14] inbox: LIST, the queued turns
-- KEYS[15] day_usage: HASH, token usage and cost by model for the day (UTC) of the flush, and
--          by agent, batch and owner ("@agent:<name>:<counter>", "@batch:<id>:<counter>",
--          "@owner:<name>:<counter>")
-- KEYS[16] all_deliveries: STREAM, every conversation's notification deliveries
-- KEYS[17] webhook_endpoints: HASH
-- KEYS[18] webhook_outbox: STREAM
-- KEYS[19] failures: ZSET, conversations by when a turn of theirs last failed
-- KEYS[20] spend.batch: HASH, the batch's meta, when a settled reservation counts there
-- KEYS[21] spend.agent: HASH, the agent's spending of the reservation's day
-- KEYS[22] spend.owner: HASH, the owner's spending of the reservation's day
-- ARGV[1] flush: JSON, a FlushArgs (worker/writer.py), which says what each field holds

if flush.token ~= '' and redis.call('GET', lease_key) ~= flush.token then return {'fenced'} end

local function hset(key, fields)
  local flat = {}
  for name, value in pairs(fields) do
    flat[#flat + 1] = name
    flat[#flat + 1] = value
  end
  if #flat > 0 then redis.call('HSET', key, unpack(flat)) end
end
hset(turn_key, flush.turn)
hset(conversation_key, flush.conversation)
hset(tool_results_key, flush.tool_results)
hset(notification_key, flush.notification)
for _, entry in ipairs(flush.deliveries) do
  redis.call('XADD', deliveries_key, 'MAXLEN', '~', flush.maxlen, '*', unpack(entry))
  redis.call('XADD', all_deliveries_key, 'MAXLEN', '~', flush.maxlen, '*', unpack(entry))
end
for _, event in ipairs(flush.webhooks) do
  outbox_add(webhook_endpoints_key, webhook_outbox_key, event, flush.outbox_maxlen)
end
local first = history_write(history_keys, flush.history)
if flush.history.usage then
  for name, count in pairs(flush.history.usage) do
    if count ~= 0 then
      redis.call('HINCRBY', day_usage_key, flush.usage_model .. ':' .. name, count)
      for _, scope in ipairs(flush.usage_scopes) do
        redis.call('HINCRBY', day_usage_key, scope .. ':' .. name, count)
      end
    end
  end
end
if flush.settle then
  local settle = flush.settle
  local changes = {
    ['reserved:tokens'] = -settle.reserved_tokens, ['reserved:micros'] = -settle.reserved_micros,
    ['spent:tokens'] = settle.tokens, ['spent:micros'] = settle.micros,
  }
  for _, scope in ipairs(settle.scopes) do
    local key = spend_keys[scope] or conversation_key
    for field, change in pairs(changes) do
      -- Lua writes a negated 0 as "-0", which HINCRBY refuses
      if change ~= 0 then redis.call('HINCRBY', key, field, change) end
    end
  end
end
if flush.failed then
  redis.call('ZADD', failures_key, flush.failed.at, flush.failed.conversation_id)
  redis.call('ZREMRANGEBYRANK', failures_key, 0, -(flush.failed.kept + 1))
end
local ids = {}
for _, event in ipairs(flush.events) do
  ids[#ids + 1] = emit(events_key, flush.maxlen, flush.ttl_ms, flush.channels, event)
end
-- The status change comes after the flush's own events; the conversation may have been
-- closed while the turn ran, and then it is the other change that is written.
local change = flush.status
if change then
  if flush.status_if_closed and redis.call('HGET', conversation_key, 'closed') == '1' then
    change = flush.status_if_closed
  end
  redis.call('HSET', conversation_key, 'status', change.status)
  ids[#ids + 1] = emit(events_key, flush.maxlen, flush.ttl_ms, flush.channels, change.event)
end
local cancel = 0
if flush.turn_id ~= '' and redis.call('HGET', conversation_key, 'cancel_turn') == flush.turn_id then
  cancel = 1
end
-- A turn that ends with nothing queued lets the lease go here, as the claim that would
-- follow finds no work and does (worker/runtime.py): one round trip fewer per turn. A
-- prompt queued after this finds the lease free for its own `advance`.
local released = 0
if flush.release_if_idle and flush.token ~= '' and redis.call('LLEN', inbox_key) == 0 then
  redis.call('DEL', lease_key)
  released = 1
end
return {'ok', first, cancel, ids, released}
