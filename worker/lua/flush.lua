-- The worker's flush (worker/writer.py): one fenced round trip that writes what a turn did.
-- Runs after shared/store/lua/emit.lua, history_write.lua and webhook_outbox.lua, whose
-- functions it calls.
-- Returns {'fenced'} when another worker holds the lease (nothing is written), else
-- {'ok', position of the first step appended, 1 if abort was asked for this turn, event ids,
--  1 if a turn's end let the lease go}.
local lease_key = KEYS[1]
local conversation_key = KEYS[2]
local turn_key = KEYS[3]
local events_key = KEYS[4]
local tool_results_key = KEYS[5]
local notification_key = KEYS[6]  -- the turn's key again when the flush files no notification
local deliveries_key = KEYS[7]  -- the conversation's notification delivery stream
local history_keys = {KEYS[8], KEYS[9], KEYS[10], KEYS[11], KEYS[12], KEYS[13]}
local inbox_key = KEYS[14]
local day_usage_key = KEYS[15]  -- token usage by model for the day (UTC) of the flush
local all_deliveries_key = KEYS[16]  -- every conversation's notification deliveries
local webhook_endpoints_key, webhook_outbox_key = KEYS[17], KEYS[18]
local failures_key = KEYS[19]  -- conversations by when a turn of theirs last failed
-- The flush: a FlushArgs (worker/writer.py), which says what each field holds.
local flush = cjson.decode(ARGV[1])

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
    if count ~= 0 then redis.call('HINCRBY', day_usage_key, flush.usage_model .. ':' .. name, count) end
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
