-- Queues a turn under the conversation's double-text policy (ConversationStore.submit);
-- emit.lua and cancel_queued.lua run before it.
-- KEYS[1] conversation: HASH, the conversation
-- KEYS[2] inbox: LIST of its queued turns
-- KEYS[3] turn: HASH, the new turn
-- KEYS[4] events: STREAM, the conversation's events
-- KEYS[5] turn_ids: SET, every turn id it took (where the archive finds their hashes)
-- ARGV[1] cid: the conversation's id
-- ARGV[2] turn_id: the new turn's id
-- ARGV[3] prompt: JSON, its Content
-- ARGV[4] policy: the double-text policy ('' for the conversation's own)
-- ARGV[5] now: s
-- ARGV[6] maxlen: of the event stream (MAXLEN ~)
-- ARGV[7] ttl_ms: of the event stream
-- ARGV[8] channel: the conversation's live channel
-- ARGV[9] channel_all: the global live channel
-- ARGV[10] owner: who the conversation must have been created by ('' for any)
-- ARGV[11] options: JSON, the turn's PromptOptions ('' for none)
-- ARGV[12] title: the conversation's title, if it has none yet
-- ARGV[13] queue: the turns queue's key, for an `advance` ('' for none)
-- ARGV[14] advance: the `advance` message for it
-- Returns {'ok', the last event id} | {'not_found'} | {'not_owner'} | {'closed'} |
-- {'busy', the active turn} | {'archiving'} | {'exists'} (a turn of that id took this very
-- prompt: a sender's retry, nothing queued again) | {'conflict'} (it took another prompt).
if redis.call('EXISTS', conversation_key) == 0 then return {'not_found'} end
-- the archiver took it (shared/archive/): its snapshot must stay the whole conversation
if redis.call('HEXISTS', conversation_key, 'archiving') == 1 then return {'archiving'} end
if owner ~= '' and redis.call('HGET', conversation_key, 'owner') ~= owner then
  return {'not_owner'}
end
-- a turn id the sender chose (an idempotency key) that is taken already: its retry
if redis.call('SISMEMBER', turn_ids_key, turn_id) == 1 then
  if redis.call('HGET', turn_key, 'prompt') == prompt then return {'exists'} end
  return {'conflict'}
end
if redis.call('HGET', conversation_key, 'closed') == '1' then return {'closed'} end
local active = redis.call('HGET', conversation_key, 'active_turn') or ''
local queued = redis.call('LLEN', inbox_key)
local channels = {channel, channel_all}
if policy == '' then policy = redis.call('HGET', conversation_key, 'policy') or 'enqueue' end
if policy == 'reject' and (active ~= '' or queued > 0) then return {'busy', active} end
if policy == 'interrupt' then
  cancel_queued(conversation_key, inbox_key, events_key, maxlen, ttl_ms, channels, cid,
                'interrupted', now)
  if active ~= '' then redis.call('HSET', conversation_key, 'cancel_turn', active) end
end
redis.call('HSET', turn_key, 'conversation_id', cid, 'turn_id', turn_id, 'prompt', prompt,
  'status', 'queued', 'created_at', now)
if options ~= '' then redis.call('HSET', turn_key, 'options', options) end
if title ~= '' then redis.call('HSETNX', conversation_key, 'title', title) end
redis.call('RPUSH', inbox_key, turn_id)
redis.call('SADD', turn_ids_key, turn_id)
redis.call('HSET', conversation_key, 'updated_at', now)
if queue ~= '' then redis.call('LPUSH', queue, advance) end  -- its `advance`, if given
local last = redis.call('XREVRANGE', events_key, '+', '-', 'COUNT', 1)
if #last == 0 then return {'ok', '0-0'} end
return {'ok', last[1][1]}
