-- The page of a sorted set after a cursor (worker/cursor.py): from the member's rank when
-- it is still there with that score, else from the first entry at that score (re-reading a
-- few, never skipping one).
-- KEYS[1] index: ZSET, the sorted set walked
-- ARGV[1] score: the cursor's score ('' = from the start)
-- ARGV[2] member: the cursor's member
-- ARGV[3] size: the page size
-- Returns the page's members and scores, flat.
local start = 0
if score ~= '' then
  local seen = redis.call('ZSCORE', index_key, member)
  if seen and tonumber(seen) == tonumber(score) then
    start = redis.call('ZRANK', index_key, member) + 1
  else
    start = redis.call('ZCOUNT', index_key, '-inf', '(' .. score)
  end
end
return redis.call('ZRANGE', index_key, start, start + tonumber(size) - 1, 'WITHSCORES')
