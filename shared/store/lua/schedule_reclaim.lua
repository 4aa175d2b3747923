-- Takes over claims whose beat never fired them: a claim goes to the caller that still sees
-- the claim time it read (compare-and-set), which renews it, so two beats finding the same
-- stale claim hand it to one of them.
-- KEYS[1] claimed: ZSET "<due ms>:<name>" -> when it was claimed (ms)
-- ARGV[1] request: JSON {"now": ms, "claims": [[claim member, claimed ms as read]]}, all strings

local won = {}
for _, claim in ipairs(request.claims) do
  local member, seen = claim[1], claim[2]
  local score = redis.call('ZSCORE', claimed_key, member)
  if score and tonumber(score) == tonumber(seen) then
    redis.call('ZADD', claimed_key, request.now, member)
    won[#won + 1] = member
  end
end
return won
