-- Before a model call (worker/budget.py): reads the model's price and reserves the call's
-- worst case (prompt tokens + max output tokens, and their cost at that price) against every
-- budget that bounds the call, all or none, so that workers together overshoot a budget by no
-- more than the calls in flight. The flush that follows the call settles the reservation.
-- It also reads how long the provider stays paused after a 429 (shared/store/rate_limit.py),
-- so a call without a rate limit learns of a pause in the same round trip.
-- It checks the lease's fencing token first, as the flush does: a flush held for this round
-- trip (worker/writer.py: Writer.carrying) runs just before it, and a leg that lost its lease
-- reserves nothing.
-- Returns {1, price JSON or false, tokens reserved, millionths reserved, pause ms}, or
-- {0, scope, unit, limit, used} for the first budget the call does not fit, or {'fenced'}.
-- KEYS[1] prices: HASH, model prices by "<provider>/<model>"
-- KEYS[2] limit.conversation: HASH holding `limit:<unit>` (the conversation's own hash)
-- KEYS[3] limit.batch: HASH, the batch's meta
-- KEYS[4] limit.agent: HASH, the agent's daily budget
-- KEYS[5] limit.owner: HASH, the owner's daily budget
-- KEYS[6] spend.conversation: HASH of `spent:<unit>` and `reserved:<unit>`
-- KEYS[7] spend.batch: HASH
-- KEYS[8] spend.agent: HASH, today's
-- KEYS[9] spend.owner: HASH, today's
-- KEYS[10] pause: STRING, the provider's pause after a 429, expiring with it
-- KEYS[11] lease: STRING, the conversation's lease (its fencing token)
-- ARGV[1] price_field: "<provider>/<model>"
-- ARGV[2] prompt_tokens: the prompt's estimated tokens
-- ARGV[3] max_output: the call's max output tokens
-- ARGV[4] active: JSON list of the scopes that apply ("conversation", "batch", ...)
-- ARGV[5] day_ttl_s: how long a day's spend is kept
-- ARGV[6] price_given: '' to read it from KEYS[1]; else the price JSON already read, or 'none'
--         (on a cluster the scopes outside the conversation's slot are reserved one call
--         each, after the conversation's, at the price it read)
-- ARGV[7] token: the leg's fencing token ('' to check none: those later calls on a cluster)
if token ~= '' and redis.call('GET', lease_key) ~= token then return {'fenced'} end
local price_json = false
if price_given == '' then
  price_json = redis.call('HGET', prices_key, price_field)
elseif price_given ~= 'none' then
  price_json = price_given
end
local tokens = tonumber(prompt_tokens) + tonumber(max_output)
local micros = 0
local priced = false
if price_json then
  local price = cjson.decode(price_json)
  micros = math.ceil(tonumber(prompt_tokens) * price.input_per_mtok + tonumber(max_output) * price.output_per_mtok)
  priced = true
end
local want = {tokens = tokens, micros = micros}
local scopes = cjson.decode(active)
for _, scope in ipairs(scopes) do
  for _, unit in ipairs({'tokens', 'micros'}) do
    local limit = redis.call('HGET', limit_keys[scope], 'limit:' .. unit)
    if limit then
      local spend = spend_keys[scope]
      local used = tonumber(redis.call('HGET', spend, 'spent:' .. unit) or '0')
        + tonumber(redis.call('HGET', spend, 'reserved:' .. unit) or '0')
      local refused = nil
      if unit == 'micros' and not priced then
        refused = 'unpriced'
      elseif used + want[unit] > tonumber(limit) then
        refused = unit
      end
      if refused then
        -- a batch stops dispatching until its budget is raised (batch_dispatch.lua)
        if scope == 'batch' then redis.call('HSET', limit_keys.batch, 'held', 'budget:' .. unit) end
        return {0, scope, refused, limit, used}
      end
    end
  end
end
for _, scope in ipairs(scopes) do
  local spend = spend_keys[scope]
  redis.call('HINCRBY', spend, 'reserved:tokens', tokens)
  redis.call('HINCRBY', spend, 'reserved:micros', micros)
  if scope == 'agent' or scope == 'owner' then redis.call('EXPIRE', spend, day_ttl_s) end
end
return {1, price_json or false, tokens, micros, math.max(redis.call('PTTL', pause_key), 0)}
