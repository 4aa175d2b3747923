-- Takes outbox entries for the relay that holds (or now takes) the relay lease
-- (shared/store/task_outbox.py).
-- KEYS[1] lease: STRING, the token of the relay publishing the outbox (PX)
-- KEYS[2] outbox: LIST, tasks state writes asked for (LPUSH: the oldest at the right)
-- KEYS[3] relaying: LIST, entries taken and not yet acknowledged, oldest first
-- ARGV[1] token: the relay's own
-- ARGV[2] lease_ms: how long the lease lasts unless renewed (each take renews it)
-- ARGV[3] limit: the most entries to return
-- Returns {'held'} when another relay holds the lease. Else {'ok', entries...}: entries taken
-- before and never acknowledged (a relay that died, or this one's failed publish) first, on
-- their own; else up to `limit` entries moved from the outbox.
local holder = redis.call('GET', lease_key)
if holder and holder ~= token then return {'held'} end
redis.call('SET', lease_key, token, 'PX', lease_ms)
local limit = tonumber(limit)
local left = redis.call('LRANGE', relaying_key, 0, limit - 1)
if #left > 0 then return {'ok', unpack(left)} end
local taken = redis.call('RPOP', outbox_key, limit)
if not taken then return {'ok'} end
redis.call('RPUSH', relaying_key, unpack(taken))
return {'ok', unpack(taken)}
