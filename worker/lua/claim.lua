-- The claim (worker/runtime.py): takes (or checks) the lease and the work together, in one
-- round trip. Runs after shared/store/lua/emit.lua, whose `emit` it calls.
--
-- The work is the active turn, else the next queued one made active. With no work it takes
-- no lease, or lets the held one go, so a prompt queued meanwhile always finds the lease free
-- for its own `advance`. A held conversation (a batch item its batch has not dispatched) is
-- never started.
--
-- A batch item's parked turn whose notification is settled first needs a place under its
-- batch's cap: without `admitted` the claim takes no lease and answers {'admit', batch id};
-- the worker asks the batch (`BatchStore.admit`) and claims again admitted, or leaves the
-- item waiting for the batch to release it when a place frees.
--
-- A turn parked on a notification that is settled now goes on: the conversation and the
-- turn are `running` again and the `status` event is out before the leg has read anything
-- else (an aborted turn is left to the leg, which cancels it). The notification comes back
-- with the claim, so a resumed leg reads nothing more.
--
-- The operator's tool rules come back with the work: every turn needs them (the tools a model
-- is offered). Their hash is global, outside the conversation's Cluster slot, as the queue is.
--
-- A turn that has not started (no checkpoint) gets its context window too, as
-- history_context.lua reads it for a turn starting at `appended`: its first model call
-- needs it, and the leg holds the lease, so no write comes between. A turn under way reads
-- its own later. Runs after history_from_position.lua, whose `from_position` it calls.
--
-- Returns {'busy'} | {'held'} | {'lost'} | {'idle'} | {'admit', batch id} | {'ok', token,
-- turn id, conversation, turn, appended, queued, parked notification id, its hash, the tool
-- rules' hash, the window: {first position, steps} or {} for a turn under way}.
-- KEYS[1] conversation: HASH
-- KEYS[2] inbox: LIST, the queued turns
-- KEYS[3] history_meta: HASH, the history's counts
-- KEYS[4] lease: STRING, the lease's fencing token
-- KEYS[5] fence: STRING, the counter fencing tokens come from
-- KEYS[6] events: STREAM, the conversation's events
-- KEYS[7] policy_rules: HASH, the operator's tool rules (global)
-- KEYS[8] steps: LIST of the history's retained steps
-- KEYS[9] compactions: LIST of absolute positions of compactions
-- KEYS[10] overflow: LIST of the latest turn's trimmed steps
-- ARGV[1] turn_prefix: "<prefix>:{cid}:turn:"
-- ARGV[2] token: the held lease's fencing token ('' to take the lease)
-- ARGV[3] ttl_ms: the lease's
-- ARGV[4] note_prefix: "<prefix>:{cid}:notification:"
-- ARGV[5] cid: the conversation's id
-- ARGV[6] maxlen: of the event stream (MAXLEN ~)
-- ARGV[7] events_ttl_ms: of the event stream
-- ARGV[8] channel: the conversation's live channel
-- ARGV[9] channel_all: the global live channel
-- ARGV[10] admitted: '1': the item's batch gave it a place (BatchStore.admit)

local channels = {channel, channel_all}

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

local parked = redis.call('HGET', conversation_key, 'parked_on') or ''
local note = {}
local own = cid .. '.'
local resumes = false
if parked ~= '' and string.sub(parked, 1, #own) == own then
  local note_key = note_prefix .. string.sub(parked, #own + 1)
  note = redis.call('HGETALL', note_key)
  local settled = redis.call('HGET', note_key, 'status')
  local waiting = redis.call('HGET', conversation_key, 'status') == 'waiting_for_user'
  local aborted = (redis.call('HGET', conversation_key, 'cancel_turn') or '') == active
  resumes = settled and settled ~= 'pending' and waiting and not aborted
end
if resumes and token == '' and admitted ~= '1' then
  local config = cjson.decode(redis.call('HGET', conversation_key, 'config') or '{}')
  if type(config.batch_id) == 'string' then return {'admit', config.batch_id} end
end
if token == '' then
  token = tostring(redis.call('INCR', fence_key))
  redis.call('SET', lease_key, token, 'PX', ttl_ms)
end
if resumes then
  redis.call('HSET', conversation_key, 'status', 'running', 'parked_on', '')
  redis.call('HSET', turn_prefix .. active, 'status', 'running')
  emit(events_key, maxlen, events_ttl_ms, channels, cjson.encode(
    {kind = 'status', conversation_id = cid, turn_id = active, status = 'running'}))
end
local appended = redis.call('HGET', history_meta_key, 'appended') or '0'
local window = {}
if (redis.call('HGET', turn_prefix .. active, 'checkpoint') or '') == '' then
  local start = 0
  local last = redis.call('LINDEX', compactions_key, -1)
  if last then start = math.min(tonumber(last), tonumber(appended)) end
  window = from_position(steps_key, history_meta_key, overflow_key, start)
end
return {'ok', token, active, redis.call('HGETALL', conversation_key),
        redis.call('HGETALL', turn_prefix .. active), appended, redis.call('LLEN', inbox_key),
        parked, note, redis.call('HGETALL', policy_rules_key), window}
