-- Lets the lease go (worker/lease.py) if this worker still holds it, and says whether the
-- conversation has work a worker should pick up.
-- KEYS[1] lease: STRING, the holder's fencing token
-- KEYS[2] conversation: HASH, the conversation
-- KEYS[3] inbox: LIST, its queued turns
-- ARGV[1] token: the fencing token this worker holds
-- Returns 1 when a turn is active and not waiting for a user, or one is queued; else 0.
if redis.call('GET', lease_key) == token then redis.call('DEL', lease_key) end
local active = redis.call('HGET', conversation_key, 'active_turn') or ''
local status = redis.call('HGET', conversation_key, 'status') or ''
if active ~= '' and status ~= 'waiting_for_user' then return 1 end
if active == '' and redis.call('LLEN', inbox_key) > 0 then return 1 end
return 0
