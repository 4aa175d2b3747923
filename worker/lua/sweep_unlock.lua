-- Lets the reconcile sweep's lock go (worker/sweep/reconcile.py) if the caller holds it.
-- KEYS[1] lock: STRING, the holder's token
-- ARGV[1] token: the caller's token
-- Returns 1 let go, 0 held by another (or expired).
if redis.call('GET', lock_key) == token then return redis.call('DEL', lock_key) end
return 0
