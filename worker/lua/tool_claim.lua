-- Claims a tool call before its tool runs (worker/tool_ledger.py), fenced as the flush is: a
-- flush held for this round trip (worker/writer.py: Writer.carrying, the model's response
-- that asked for the call) runs just before it, and a leg that lost its lease claims nothing.
-- KEYS[1] tool_results: HASH of the conversation's tool calls by id
-- KEYS[2] lease: STRING, the conversation's lease (its fencing token)
-- ARGV[1] call_id: the call
-- ARGV[2] record: the claim record, naming the leg
-- ARGV[3] token: the leg's fencing token ('' checks none)
-- Returns 1 when claimed, 0 when an earlier leg claimed it, or 'fenced'.
if token ~= '' and redis.call('GET', lease_key) ~= token then return 'fenced' end
return redis.call('HSETNX', tool_results_key, call_id, record)
