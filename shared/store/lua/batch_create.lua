-- A batch's record in one step (BatchStore.create), so a creation cut short leaves either
-- all of it or nothing.
-- KEYS[1] meta: HASH, the batch
-- ARGV[1] config: JSON, its BatchConfig
-- ARGV[2] status: its BatchStatus
-- ARGV[3] max_concurrency: its cap
-- ARGV[4] created_at: s
-- ARGV[5] created_by: who created it
-- ARGV[6] source: the batch it re-runs ('' for none)
-- Returns 1 created, 0 the id is taken.
if redis.call('HSETNX', meta_key, 'config', config) == 0 then return 0 end
redis.call('HSET', meta_key, 'status', status, 'max_concurrency', max_concurrency, 'total', 0,
           'created_at', created_at, 'created_by', created_by)
if source ~= '' then redis.call('HSET', meta_key, 'source', source) end
return 1
