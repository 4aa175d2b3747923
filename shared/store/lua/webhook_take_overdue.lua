-- Takes an overdue delivery for re-sending: it goes to the caller that still sees the due
-- time it read (compare-and-set), which pushes that time on, so sweepers in several
-- workers re-send it once.
-- KEYS[1] pending: ZSET delivery id -> when its next attempt is due (s)
-- ARGV[1] request: JSON {"id": delivery id, "seen": the due time read, "until": the new due time}

local score = redis.call('ZSCORE', pending_key, request.id)
if not score or tonumber(score) ~= tonumber(request.seen) then return 0 end
redis.call('ZADD', pending_key, request['until'], request.id)
return 1
