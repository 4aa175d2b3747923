-- Settles a tool call's claim that the claiming leg still holds (worker/tool_ledger.py): the
-- leg lost its Redis connection around the claim or the result, and says what it knows.
-- KEYS[1] tool_results: HASH of the conversation's tool calls by id
-- ARGV[1] call_id: the call
-- ARGV[2] claimed: the leg's own claim record, as it wrote it
-- ARGV[3] outcome: the call's outcome record, or '' when its tool never ran (the claim goes)
-- Returns 1 when the claim was still the leg's and is settled, else 0 (another leg's since).
if redis.call('HGET', tool_results_key, call_id) ~= claimed then return 0 end
if outcome == '' then
  redis.call('HDEL', tool_results_key, call_id)
else
  redis.call('HSET', tool_results_key, call_id, outcome)
end
return 1
