-- history_write(k, h): appends finished steps with their usage (and a turn start) to one
-- conversation's history and trims it to its bound. Returns the absolute position of the
-- first step appended.
--   k: the history's keys by name (HISTORY_KEYS, shared/store/keys.py): steps, meta,
--      turn_starts, compactions, usage, overflow
--   h: a HistoryWrite (shared/store/history.py), decoded: max_history_size, start_turn,
--      usage (absent for none) and steps, each {doc, compaction, response, structured}
-- Trimming moves the latest turn's own steps to the overflow list instead of dropping them
-- (a turn start empties it), so a turn's response keeps every step.
-- `usage_counters` (the loader puts it before: USAGE_FIELDS, shared/models/steps.py) names the
-- counters summed.
local function history_write(k, h)
  local steps_key, meta_key, turns_key = k.steps, k.meta, k.turn_starts
  local compactions_key, usage_key, overflow_key = k.compactions, k.usage, k.overflow
  local appended = tonumber(redis.call('HGET', meta_key, 'appended') or '0')
  local first = appended
  if h.start_turn then
    redis.call('DEL', overflow_key)
    redis.call('HSET', meta_key, 'turn_start', appended)
    redis.call('RPUSH', turns_key, appended)
    for _, name in ipairs(usage_counters) do redis.call('HDEL', usage_key, 'turn:' .. name) end
  end
  if h.usage then
    for _, name in ipairs(usage_counters) do
      redis.call('HINCRBY', usage_key, name, h.usage[name])
      redis.call('HINCRBY', usage_key, 'turn:' .. name, h.usage[name])
    end
  end
  for _, step in ipairs(h.steps) do
    redis.call('RPUSH', steps_key, step.doc)
    if step.compaction then redis.call('RPUSH', compactions_key, appended) end
    if step.response then redis.call('HSET', meta_key, 'last_response', step.response) end
    if step.structured then redis.call('HSET', meta_key, 'last_structured', step.structured) end
    appended = appended + 1
  end
  if #h.steps > 0 then redis.call('HSET', meta_key, 'appended', appended) end
  if h.max_history_size > 0 then
    local len = redis.call('LLEN', steps_key)
    if len > h.max_history_size then
      local drop = len - h.max_history_size
      local before = tonumber(redis.call('HGET', meta_key, 'trimmed') or '0')
      local turn_start = redis.call('HGET', meta_key, 'turn_start')
      if turn_start then
        local from = math.max(tonumber(turn_start) - before, 0)
        if from < drop then
          for _, raw in ipairs(redis.call('LRANGE', steps_key, from, drop - 1)) do
            redis.call('RPUSH', overflow_key, raw)
          end
        end
      end
      redis.call('LTRIM', steps_key, drop, -1)
      local trimmed = redis.call('HINCRBY', meta_key, 'trimmed', drop)
      for _, key in ipairs({turns_key, compactions_key}) do
        while true do
          local head = redis.call('LINDEX', key, 0)
          if not head or tonumber(head) >= trimmed then break end
          redis.call('LPOP', key)
        end
      end
    end
  end
  return first
end
