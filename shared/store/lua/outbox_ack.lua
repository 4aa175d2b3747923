-- Drops entries the relay published (shared/store/task_outbox.py), while it holds the lease.
-- KEYS[1] lease: STRING, the token of the relay publishing the outbox
-- KEYS[2] relaying: LIST, entries taken and not yet acknowledged, oldest first
-- ARGV[1] token: the relay's own
-- ARGV[2] count: how many of the oldest entries it published
-- ARGV[3] release: '1' to give the lease up too (a relay that stops)
-- Returns 1; 0 when another relay holds the lease: it publishes those entries again.
if redis.call('GET', lease_key) ~= token then return 0 end
local count = tonumber(count)
if count > 0 then redis.call('LTRIM', relaying_key, count, -1) end
if release == '1' then redis.call('DEL', lease_key) end
return 1
