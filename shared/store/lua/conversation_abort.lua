-- Aborts a conversation's queued and running turns, and closes it when asked
-- (ConversationStore.abort); emit.lua and cancel_queued.lua run before it.
-- KEYS[1] conversation: HASH, the conversation
-- KEYS[2] inbox: LIST of its queued turns
-- KEYS[3] events: STREAM, the conversation's events
-- ARGV[1] cid: the conversation's id
-- ARGV[2] now: s
-- ARGV[3] maxlen: of the event stream (MAXLEN ~)
-- ARGV[4] ttl_ms: of the event stream
-- ARGV[5] channel: the conversation's live channel
-- ARGV[6] channel_all: the global live channel
-- ARGV[7] close: '1' closes the conversation too
-- ARGV[8] closed_event: JSON, the `status` event of its closing
-- Returns {'ok', the active turn ('' for none), queued turns cancelled} | {'not_found'}.
if redis.call('EXISTS', conversation_key) == 0 then return {'not_found'} end
local channels = {channel, channel_all}
local cancelled = cancel_queued(conversation_key, inbox_key, events_key, maxlen, ttl_ms,
                                channels, cid, 'aborted', now)
local active = redis.call('HGET', conversation_key, 'active_turn') or ''
if active ~= '' then redis.call('HSET', conversation_key, 'cancel_turn', active) end
if close == '1' and redis.call('HGET', conversation_key, 'closed') ~= '1' then
  redis.call('HSET', conversation_key, 'closed', '1', 'updated_at', now)
  if active == '' then
    redis.call('HSET', conversation_key, 'status', 'closed')
    emit(events_key, maxlen, ttl_ms, channels, closed_event)
  end
end
return {'ok', active, cancelled}
