-- Settles a pending notification (NotificationStore's compare-and-set), emitting its
-- `notification` event; emit.lua runs before it.
-- KEYS[1] notification: HASH, the notification
-- KEYS[2] events: STREAM, its conversation's events
-- ARGV[1] request: JSON: status, resolution (JSON), actor, at, maxlen, ttl_ms, channels, cid,
--   turn_id, nid, expires_at ('' for none), expired and expiry_actor (an expiry's), queue
--   and task (the `advance` to push, '' for none); quorum (distinct approvers an allow
--   needs), approver (who allows) and pin (the hash of the arguments allowed)
-- The deadline is judged by Redis's clock, the one every resolver shares: after it, a
-- resolution (or a cancel) expires the notification instead and gets {'expired_now', at};
-- an expiry before it changes nothing and gets {'early'}. An allow short of its quorum is
-- recorded (field `allow:<approver>` = pin; one per approver, the latest wins) and gets
-- {'parked', agreeing}; the allow that makes `quorum` approvers agree on one pin settles it.
local a = request
local status = redis.call('HGET', notification_key, 'status')
if not status then return {'not_found'} end
if status ~= 'pending' then
  return {status, redis.call('HGET', notification_key, 'resolved_by') or '',
          redis.call('HGET', notification_key, 'resolved_at') or '0',
          redis.call('HGET', notification_key, 'resolution') or ''}
end
local clock = redis.call('TIME')
local now = tonumber(clock[1]) + tonumber(clock[2]) / 1000000
local deadline = tonumber(a.expires_at)
local new, resolution, actor, at = a.status, a.resolution, a.actor, a.at
if deadline and new == 'expired' and now < deadline then return {'early'} end
if deadline and new ~= 'expired' and now >= deadline then
  new, resolution, actor, at = 'expired', a.expired, a.expiry_actor, string.format('%.6f', now)
end
local quorum = tonumber(a.quorum) or 1
if new == a.status and quorum > 1 then
  redis.call('HSET', notification_key, 'quorum', quorum, 'allow:' .. a.approver, a.pin)
  local fields = redis.call('HGETALL', notification_key)
  local agreeing = 0
  for i = 1, #fields, 2 do
    if string.sub(fields[i], 1, 6) == 'allow:' and fields[i + 1] == a.pin then
      agreeing = agreeing + 1
    end
  end
  if agreeing < quorum then return {'parked', tostring(agreeing)} end
end
redis.call('HSET', notification_key, 'status', new, 'resolution', resolution, 'resolved_by', actor,
           'resolved_at', at)
if a.queue ~= '' then redis.call('LPUSH', a.queue, a.task) end
emit(events_key, a.maxlen, a.ttl_ms, a.channels, cjson.encode(
  {kind = 'notification', conversation_id = a.cid, turn_id = a.turn_id, notification_id = a.nid,
   notification_kind = 'interaction', status = new}))
if new ~= a.status then return {'expired_now', at} end
return {'ok'}
