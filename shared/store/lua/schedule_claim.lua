-- Claims due slots of schedules: a slot goes to the caller that still sees its due time as
-- the schedule's score (compare-and-set), which moves the schedule on to its next slot and
-- records the claim, so a beat that dies before firing the slot leaves it to be reclaimed.
-- KEYS[1] due: ZSET schedule name -> its next slot (ms)
-- KEYS[2] claimed: ZSET "<due ms>:<name>" -> when it was claimed (ms)
-- ARGV[1] request: JSON {"now": ms, "slots": [[name, due ms, next ms or '', claim member]]},
--   all strings

local won = {}
for _, slot in ipairs(request.slots) do
  local name, slot_ms, following, member = slot[1], slot[2], slot[3], slot[4]
  local score = redis.call('ZSCORE', due_key, name)
  if score and tonumber(score) == tonumber(slot_ms) then
    if following == '' then redis.call('ZREM', due_key, name)
    else redis.call('ZADD', due_key, following, name) end
    redis.call('ZADD', claimed_key, request.now, member)
    won[#won + 1] = name
  end
end
return won
