-- The claim (worker/runtime.py): takes (or checks) the lease and the work together, in one
-- round trip. Runs after shared/store/lua/emit.lua, whose `emit` it calls.
--
-- The work is the active turn, else the next queued one made active. With no work it takes
-- no lease, or lets the held one go, so a prompt queued meanwhile always finds the lease free
-- for its own `advance`. A held conversation (a batch item its batch has not dispatched) is
-- never started.
--
-- A turn parked on a notification that is settled now goes on: the conversation and the
-- turn are `running` again and the `status` event is out before the leg has read anything
-- else (an aborted turn is left to the leg, which cancels it). The notification comes back
-- with the claim, so a resumed leg reads nothing more.
--
-- The operator's tool rules come back with the work: every turn needs them (the tools a model
-- is offered). Their hash is global, outside the conversation's Cluster slot, as the queue is.
--
-- Returns {'busy'} | {'held'} | {'lost'} | {'idle'} | {'ok', token, turn id, conversation,
-- turn, appended, queued, parked notification id, its hash, the tool rules' hash}.
local conversation_key = KEYS[1]
local inbox_key = KEYS[2]
local history_meta_key = KEYS[3]
local lease_key = KEYS[4]
local fence_key = KEYS[5]
local events_key = KEYS[6]
local policy_rules_key = KEYS[7]
local turn_prefix = ARGV[1]  -- "<prefix>:{cid}:turn:"
local token = ARGV[2]  -- '' to take the lease
local ttl_ms = ARGV[3]
local note_prefix = ARGV[4]  -- "<prefix>:{cid}:notification:"
local cid = ARGV[5]
local maxlen, events_ttl_ms = ARGV[6], ARGV[7]
local channels = {ARGV[8], ARGV[9]}

if token == '' then
  if redis.call('EXISTS', lease_key) == 1 then return {'busy'} end
  if redis.call('HGET', conversation_key, 'held') == '1' then return {'held'} end
elseif redis.call('GET', lease_key) ~= token then
  return {'lost'}
end
local active = redis.call('HGET', conversation_key, 'active_turn') or ''
if active == '' then
  active = redis.call('LPOP', inbox_key)
  if not active then
    if token ~= '' then redis.call('DEL', lease_key) end
    return {'idle'}
  end
  redis.call('HSET', conversation_key, 'active_turn', active)
end
if token == '' then
  token = tostring(redis.call('INCR', fence_key))
  redis.call('SET', lease_key, token, 'PX', ttl_ms)
end

local parked = redis.call('HGET', conversation_key, 'parked_on') or ''
local note = {}
local own = cid .. '.'
if parked ~= '' and string.sub(parked, 1, #own) == own then
  local note_key = note_prefix .. string.sub(parked, #own + 1)
  note = redis.call('HGETALL', note_key)
  local settled = redis.call('HGET', note_key, 'status')
  local waiting = redis.call('HGET', conversation_key, 'status') == 'waiting_for_user'
  local aborted = (redis.call('HGET', conversation_key, 'cancel_turn') or '') == active
  if settled and settled ~= 'pending' and waiting and not aborted then
    redis.call('HSET', conversation_key, 'status', 'running', 'parked_on', '')
    redis.call('HSET', turn_prefix .. active, 'status', 'running')
    emit(events_key, maxlen, events_ttl_ms, channels, cjson.encode(
      {kind = 'status', conversation_id = cid, turn_id = active, status = 'running'}))
  end
end
return {'ok', token, active, redis.call('HGETALL', conversation_key),
        redis.call('HGETALL', turn_prefix .. active),
        redis.call('HGET', history_meta_key, 'appended') or '0', redis.call('LLEN', inbox_key),
        parked, note, redis.call('HGETALL', policy_rules_key)}
