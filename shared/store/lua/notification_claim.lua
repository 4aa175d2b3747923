-- Claims or releases a pending notification (shared/store/claims.py): who says they are on it.
-- KEYS[1] notification: HASH, the notification
-- ARGV[1] request: JSON: op ('claim' or 'release'), actor, at, force (release another's)
-- A settled notification is neither claimed nor released: {status, resolved_by, resolved_at}.
-- A claim of one another holds: {'held', claimed_by, claimed_at}; a claim by its holder
-- renews it. A release of one not claimed: {'free'}; of another's without force:
-- {'held', ...}. Otherwise {'ok', whoever held it before ('' for nobody)}.
local a = request
local status = redis.call('HGET', notification_key, 'status')
if not status then return {'not_found'} end
if status ~= 'pending' then
  return {status, redis.call('HGET', notification_key, 'resolved_by') or '',
          redis.call('HGET', notification_key, 'resolved_at') or '0'}
end
local holder = redis.call('HGET', notification_key, 'claimed_by') or ''
local since = redis.call('HGET', notification_key, 'claimed_at') or '0'
if a.op == 'claim' then
  if holder ~= '' and holder ~= a.actor then return {'held', holder, since} end
  redis.call('HSET', notification_key, 'claimed_by', a.actor, 'claimed_at', a.at)
  return {'ok', holder}
end
if holder == '' then return {'free'} end
if holder ~= a.actor and not a.force then return {'held', holder, since} end
redis.call('HDEL', notification_key, 'claimed_by', 'claimed_at')
return {'ok', holder}
