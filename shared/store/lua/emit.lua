-- emit(stream, maxlen, ttl_ms, channels, json): appends one event to the conversation's
-- stream (for replay) and publishes "<stream id> <json>" on each channel (for live readers),
-- so both carry the same event with the same id. Returns the stream id.
local function emit(stream, maxlen, ttl_ms, channels, json)
  local id = redis.call('XADD', stream, 'MAXLEN', '~', maxlen, '*', 'e', json)
  redis.call('PEXPIRE', stream, ttl_ms)
  for _, channel in ipairs(channels) do redis.call('PUBLISH', channel, id .. ' ' .. json) end
  return id
end
