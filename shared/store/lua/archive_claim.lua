-- Takes a finished conversation for the archiver (shared/archive/archiver.py): from here on
-- it takes no prompt (conversation_submit.lua refuses it), so its snapshot stays whole.
-- KEYS[1] conversation: HASH
-- KEYS[2] inbox: LIST of its queued turns
-- KEYS[3] lease: STRING, held while a worker runs it
-- ARGV[1] finished_before: s; a conversation changed since is too young
-- ARGV[2] token: marks this claim
-- Returns {'claimed', token} (an earlier claim's token when one was left: a crashed pass
-- is taken up) | {'not_found'} | {'busy'} | {'young'}.
if redis.call('EXISTS', conversation_key) == 0 then return {'not_found'} end
local earlier = redis.call('HGET', conversation_key, 'archiving')
if earlier then return {'claimed', earlier} end
local state = redis.call('HMGET', conversation_key, 'status', 'active_turn', 'held', 'updated_at')
if (state[1] ~= 'idle' and state[1] ~= 'closed') or (state[2] or '') ~= '' or state[3] == '1' then
  return {'busy'}
end
if redis.call('LLEN', inbox_key) > 0 or redis.call('EXISTS', lease_key) == 1 then
  return {'busy'}
end
if tonumber(state[4] or '0') > tonumber(finished_before) then return {'young'} end
redis.call('HSET', conversation_key, 'archiving', token)
return {'claimed', token}
