-- The model's context (HistoryStore.context_window): steps from the last compaction, or the
-- turn's start if earlier, to the end (history_from_position.lua runs before it).
-- KEYS[1] steps: LIST of retained steps
-- KEYS[2] meta: HASH, the history's counts
-- KEYS[3] compactions: LIST of absolute positions of compactions
-- KEYS[4] overflow: LIST of the latest turn's trimmed steps
-- ARGV[1] turn_start: the absolute position the current turn starts at
-- Returns {first position, steps}.
local start = 0
local last = redis.call('LINDEX', compactions_key, -1)
if last then start = math.min(tonumber(last), tonumber(turn_start)) end
return from_position(steps_key, meta_key, overflow_key, start)
