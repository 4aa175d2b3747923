-- Files one item in its batch all at once (BatchStore), the dispatch queue last: an item is
-- never dispatched half filed.
-- KEYS[1] meta: HASH, the batch
-- KEYS[2] states: HASH, conversation id -> its item's state
-- KEYS[3] queue: LIST, items waiting for a first place
-- KEYS[4] items: LIST, the items (JSON), in order
-- KEYS[5] ids: HASH, item id -> conversation id
-- ARGV[1] cid: the item's conversation id
-- ARGV[2] item: JSON, the item
-- ARGV[3] state: its first state
-- ARGV[4] item_id: its id
-- ARGV[5] to_queue: '1' queues it for dispatch
-- Returns its index in the items list, plus one.
local length = redis.call('RPUSH', items_key, item)
redis.call('HSET', ids_key, item_id, cid)
redis.call('HSET', states_key, cid, state)
redis.call('HINCRBY', meta_key, 'count:' .. state, 1)
redis.call('HINCRBY', meta_key, 'total', 1)
if to_queue == '1' then redis.call('RPUSH', queue_key, cid) end
return length
