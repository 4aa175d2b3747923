-- Takes the next queued fire of a schedule (shared/store/schedules.py) when the run the
-- queue waits for is still the schedule's: the taken fire's run becomes the one the next waits for.
-- KEYS[1] state: HASH, the schedule's state (its `conversation_id`: the run waited for)
-- KEYS[2] queue: LIST, the due ms of queued fires
-- ARGV[1] after: the conversation the queued fires wait for
-- ARGV[2] run_prefix: the prefix of a run's conversation id
-- Returns the due ms of the fire taken; nil when none, or another caller took it.
if (redis.call('HGET', state_key, 'conversation_id') or '') ~= after then return nil end
local due = redis.call('LPOP', queue_key)
if due then redis.call('HSET', state_key, 'conversation_id', run_prefix .. due) end
return due
