-- Steps from an absolute position on (HistoryStore.steps_since; history_from_position.lua
-- runs before it).
-- KEYS[1] steps: LIST of retained steps
-- KEYS[2] meta: HASH, the history's counts
-- KEYS[3] overflow: LIST of the latest turn's trimmed steps
-- ARGV[1] position: absolute
-- Returns {first position, steps}.
return from_position(steps_key, meta_key, overflow_key, tonumber(position))
