-- Sets (or with no limits, removes) a budget's limits on the hash that holds them; a
-- conversation's or batch's hash must exist (no record is made up).
-- Returns 1, or 0 when the hash had to exist and does not.
-- KEYS[1] limits: HASH, where `limit:tokens` and `limit:micros` live
-- ARGV[1] must_exist: "1" for a conversation's or a batch's hash
-- ARGV[2] limits: JSON object, unit -> limit (an empty object removes the budget)
-- ARGV[3] is_batch: "1" for a batch: a hold for want of budget ends (its dispatch follows)
if must_exist == '1' and redis.call('EXISTS', limits_key) == 0 then return 0 end
if is_batch == '1' then redis.call('HDEL', limits_key, 'held') end
redis.call('HDEL', limits_key, 'limit:tokens', 'limit:micros')
for unit, limit in pairs(cjson.decode(limits)) do
  redis.call('HSET', limits_key, 'limit:' .. unit, limit)
end
return 1
