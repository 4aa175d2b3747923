-- Renews the lease (worker/lease.py) while its fencing token is still the holder's.
-- KEYS[1] lease: STRING, the holder's fencing token
-- ARGV[1] token: the fencing token this worker holds
-- ARGV[2] ttl_ms: the lease's new time to live
-- Returns 1 renewed, 0 lost (another worker holds it, or it expired).
if redis.call('GET', lease_key) ~= token then return 0 end
redis.call('PEXPIRE', lease_key, ttl_ms)
return 1
