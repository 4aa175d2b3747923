-- from_position(steps_key, meta_key, overflow_key, position): steps from an absolute
-- position: the latest turn's trimmed steps (the overflow holds positions trimmed - len ..
-- trimmed - 1) and then the retained ones. Returns {first, steps}.
local function from_position(steps_key, meta_key, overflow_key, position)
  local trimmed = tonumber(redis.call('HGET', meta_key, 'trimmed') or '0')
  local spilled = redis.call('LLEN', overflow_key)
  local first = math.max(position, trimmed - spilled)
  local out = {}
  if first < trimmed then
    out = redis.call('LRANGE', overflow_key, first - trimmed + spilled, -1)
  end
  for _, raw in ipairs(redis.call('LRANGE', steps_key, math.max(first - trimmed, 0), -1)) do
    out[#out + 1] = raw
  end
  return {first, out}
end
