-- Grants model calls waiting for a provider's rate limit in priority order
-- (shared/store/rate_limit.py): interactive calls, then scheduled and triggered ones (each by
-- arrival), then batch items, whose batches take turns: a batch waiter's score is its batch's
-- round, one past the batch's last, so waiters of two batches alternate. A waiter asks until
-- it is granted; the first waiters in this order may take what the buckets hold, the others
-- are told how long until their share could be there. A 429's pause holds everyone.
-- Returns 0 when granted (the buckets taken from, the waiter gone from the queues), else the
-- ms to wait before asking again.
-- KEYS[1] requests: HASH, the requests bucket (tokens, stamp in ms)
-- KEYS[2] tokens: HASH, the tokens bucket
-- KEYS[3] queue.interactive: ZSET, waiter -> arrival (ms)
-- KEYS[4] queue.scheduled: ZSET, waiter -> arrival (ms)
-- KEYS[5] queue.batch: ZSET, waiter -> its batch's round
-- KEYS[6] rounds: HASH, batch id -> its last round; ':served' -> the round served last
-- KEYS[7] amounts: HASH, waiter -> the tokens its call asks for
-- KEYS[8] seen: ZSET, waiter -> when it last asked (ms)
-- KEYS[9] pause: STRING, expiring when the provider's Retry-After ends
-- ARGV[1] waiter: the waiting call's id
-- ARGV[2] class: 'interactive', 'scheduled' or 'batch'
-- ARGV[3] batch: its batch id (class 'batch'), else ''
-- ARGV[4] amount: the call's estimated tokens
-- ARGV[5] limits: JSON {requests: [capacity, refill per ms], tokens: [...]}, each optional
-- ARGV[6] stale_ms: a waiter silent this long is dropped (its process died)
-- ARGV[7] ttl_ms: how long the queues outlive their last waiter
local clock = redis.call('TIME')
local now = tonumber(clock[1]) * 1000 + math.floor(tonumber(clock[2]) / 1000)
local order = {'interactive', 'scheduled', 'batch'}
local MAX_AHEAD = 1000  -- past this many ahead, the tokens ahead are not summed

local function forget(id)
  for _, name in ipairs(order) do redis.call('ZREM', queue_keys[name], id) end
  redis.call('HDEL', amounts_key, id)
  redis.call('ZREM', seen_key, id)
end

for _, gone in ipairs(redis.call('ZRANGEBYSCORE', seen_key, '-inf', now - tonumber(stale_ms))) do
  forget(gone)
end

local queue = queue_keys[class]
if not redis.call('ZSCORE', queue, waiter) then
  local score = now
  if class == 'batch' then
    score = tonumber(redis.call('HGET', rounds_key, ':served') or '0')
    local last = redis.call('HGET', rounds_key, batch)
    if last then score = math.max(score, tonumber(last) + 1) end
    redis.call('HSET', rounds_key, batch, score)
    redis.call('PEXPIRE', rounds_key, ttl_ms)
  end
  redis.call('ZADD', queue, score, waiter)
  redis.call('HSET', amounts_key, waiter, amount)
  redis.call('PEXPIRE', queue, ttl_ms)
  redis.call('PEXPIRE', amounts_key, ttl_ms)
end
redis.call('ZADD', seen_key, now, waiter)
redis.call('PEXPIRE', seen_key, ttl_ms)

local paused = redis.call('PTTL', pause_key)
if paused > 0 then return paused end

-- how many wait ahead of this waiter, over the classes in order
local rank = 0
for _, name in ipairs(order) do
  if name == class then
    rank = rank + redis.call('ZRANK', queue, waiter)
    break
  end
  rank = rank + redis.call('ZCARD', queue_keys[name])
end

local function tokens_ahead()
  local sum, left = 0, rank
  for _, name in ipairs(order) do
    if left <= 0 then break end
    local ids = redis.call('ZRANGE', queue_keys[name], 0, left - 1)
    if #ids > 0 then
      for _, value in ipairs(redis.call('HMGET', amounts_key, unpack(ids))) do
        sum = sum + tonumber(value or '0')
      end
    end
    left = left - #ids
  end
  return sum
end

local shapes = {}
if limits.requests then
  table.insert(shapes, {key = requests_key, shape = limits.requests, own = 1, ahead = rank})
end
if limits.tokens then
  if rank > MAX_AHEAD then return 1000 end
  local ahead = 0
  if rank > 0 then ahead = tokens_ahead() end
  table.insert(shapes, {key = tokens_key, shape = limits.tokens, own = tonumber(amount), ahead = ahead})
end

-- the bucket's level now; a call may take it once the calls ahead and its own fit
-- (the first in line only needs what a full bucket holds, so a call larger than it runs)
local wait = 0
for _, bucket in ipairs(shapes) do
  local size, rate = bucket.shape[1], bucket.shape[2]
  local level = tonumber(redis.call('HGET', bucket.key, 'tokens') or size)
  local stamp = tonumber(redis.call('HGET', bucket.key, 'stamp') or now)
  bucket.level = math.min(size, level + (now - stamp) * rate)
  local need = bucket.ahead + bucket.own
  if bucket.ahead == 0 then need = math.min(bucket.own, size) end
  if bucket.level < need then
    wait = math.max(wait, math.ceil((need - bucket.level) / rate))
  end
end
if wait > 0 then return wait end

for _, bucket in ipairs(shapes) do
  redis.call('HSET', bucket.key, 'tokens', tostring(bucket.level - bucket.own), 'stamp', now)
  redis.call('PEXPIRE', bucket.key, 3600000)
end
if class == 'batch' then
  redis.call('HSET', rounds_key, ':served', redis.call('ZSCORE', queue, waiter))
end
forget(waiter)
if class == 'batch' and redis.call('ZCARD', queue) == 0 then
  redis.call('DEL', rounds_key)  -- no batch waits: the rounds start again
end
return 0
