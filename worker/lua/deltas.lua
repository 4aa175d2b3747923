-- The worker's delta tick (worker/deltas.py): the streamed deltas of every conversation a
-- worker process runs, written in one round trip per flush window.
-- Runs after shared/store/lua/emit.lua, whose function it calls.
-- KEYS[3i+1] lease: for the i-th entry (from 0): its lease
-- KEYS[3i+2] conversation: its conversation
-- KEYS[3i+3] events: its event stream
-- ARGV[1] batch: JSON, a DeltaArgs (worker/deltas.py): maxlen, ttl_ms, the global channel,
--   and the entries, each with its fencing token, turn id, live channel and events (encoded)
-- Returns one reply per entry, in order: 'fenced' when another worker holds that
-- conversation's lease (nothing of that entry is written), else '1' when abort was asked
-- for the entry's turn and '0' when not. The fence is judged per entry: a fenced-out
-- conversation never stops the others' deltas.
local replies = {}
for i, entry in ipairs(batch.entries) do
  local k = each_keys[i]
  local lease_key, conversation_key, events_key = k.lease, k.conversation, k.events
  if redis.call('GET', lease_key) ~= entry.token then
    replies[i] = 'fenced'
  else
    local channels = {entry.channel, batch.channel}
    for _, event in ipairs(entry.events) do
      emit(events_key, batch.maxlen, batch.ttl_ms, channels, event)
    end
    if redis.call('HGET', conversation_key, 'cancel_turn') == entry.turn_id then
      replies[i] = '1'
    else
      replies[i] = '0'
    end
  end
end
return replies
