-- The model's context (HistoryStore.context_window): steps from the last compaction, or the
-- turn's start if earlier, to the end (history_from_position.lua, whose `context_window`
-- this is, runs before it).
-- KEYS[1] steps: LIST of retained steps
-- KEYS[2] meta: HASH, the history's counts
-- KEYS[3] compactions: LIST of absolute positions of compactions
-- KEYS[4] overflow: LIST of the latest turn's trimmed steps
-- ARGV[1] turn_start: the absolute position the current turn starts at
-- Returns {first position, steps}.
return context_window(steps_key, meta_key, compactions_key, overflow_key, turn_start)
