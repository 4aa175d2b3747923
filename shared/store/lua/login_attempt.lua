-- Notes one sign-in attempt in a sliding window (shared/store/login_throttle.py).
-- KEYS[1] window: ZSET, attempt -> when (ms)
-- ARGV[1] now: ms
-- ARGV[2] window_ms: the window's length
-- ARGV[3] limit: attempts allowed in the window
-- ARGV[4] attempt: a member naming this attempt
-- Returns 1 allowed (and noted), 0 over the limit (not noted: a refused attempt tries nothing).
local at, span = tonumber(now), tonumber(window_ms)
redis.call('ZREMRANGEBYSCORE', window_key, '-inf', at - span)
if redis.call('ZCARD', window_key) >= tonumber(limit) then return 0 end
redis.call('ZADD', window_key, at, attempt)
redis.call('PEXPIRE', window_key, span)
return 1
