-- Lets the lease go (worker/lease.py) if this worker still holds it, and says whether the
-- conversation has work a worker should pick up.
-- KEYS[1] lease: STRING, the holder's fencing token
-- KEYS[2] conversation: HASH, the conversation
-- KEYS[3] inbox: LIST, its queued turns
-- ARGV[1] token: the fencing token this worker holds
-- ARGV[2] note_prefix: "<prefix>:{cid}:notification:"
-- ARGV[3] cid: the conversation's id
-- Returns 1 when a turn is active and not waiting for a user, or waits on a notification
-- settled already, or one is queued; else 0. (A decision taken while the parking leg still
-- held the lease found it busy: its `advance` was spent, and this one takes its place.)
if redis.call('GET', lease_key) == token then redis.call('DEL', lease_key) end
local active = redis.call('HGET', conversation_key, 'active_turn') or ''
local status = redis.call('HGET', conversation_key, 'status') or ''
if active ~= '' and status ~= 'waiting_for_user' then return 1 end
local parked = redis.call('HGET', conversation_key, 'parked_on') or ''
local own = cid .. '.'
if active ~= '' and string.sub(parked, 1, #own) == own then
  local settled = redis.call('HGET', note_prefix .. string.sub(parked, #own + 1), 'status')
  if settled and settled ~= 'pending' then return 1 end
end
if active == '' and redis.call('LLEN', inbox_key) > 0 then return 1 end
return 0
