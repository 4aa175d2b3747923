-- Takes tokens from a bucket (shared/store/rate_limit.py), refilled by Redis's clock.
-- KEYS[1] bucket: HASH, tokens and the stamp they were counted at (ms)
-- ARGV[1] capacity: the bucket's size
-- ARGV[2] refill: tokens added per ms
-- ARGV[3] amount: tokens to take
-- ARGV[4] force: '1' takes even into debt
-- Returns the ms to wait (0: taken).
local now_parts = redis.call('TIME')
local now = tonumber(now_parts[1]) * 1000 + math.floor(tonumber(now_parts[2]) / 1000)
local size, rate, wanted = tonumber(capacity), tonumber(refill), tonumber(amount)
local tokens = tonumber(redis.call('HGET', bucket_key, 'tokens') or size)
local stamp = tonumber(redis.call('HGET', bucket_key, 'stamp') or now)
tokens = math.min(size, tokens + (now - stamp) * rate)
local wait = 0
if force ~= '1' and wanted > 0 and tokens < math.min(wanted, size) then
  wait = math.ceil((math.min(wanted, size) - tokens) / rate)
else
  tokens = tokens - wanted
end
redis.call('HSET', bucket_key, 'tokens', tostring(tokens), 'stamp', now)
redis.call('PEXPIRE', bucket_key, 3600000)
return wait
