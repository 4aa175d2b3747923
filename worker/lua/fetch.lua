-- Takes the next message off a worker's queues and records it as delivered and not yet
-- acknowledged, in one round trip (worker/broker_fetch.py). kombu's Redis transport took
-- it with BRPOP, then recorded it with a second round trip; a message it took whose
-- record never came (the connection dropped between the two) was lost.
-- KEYS[3i+1] list: for the i-th entry (from 0): one of the queues' lists, in BRPOP's order
-- KEYS[3i+2] unacked_index: ZSET, delivery tag -> when it was delivered (kombu's index)
-- KEYS[3i+3] unacked: HASH, delivery tag -> JSON [message, exchange, routing key] (kombu's)
-- ARGV[1] now: seconds since the epoch, the delivery's time in the index
-- ARGV[2] acks: JSON list, delivery tags acknowledged since (worker/broker_acks.py), whose
--   records go first
-- Returns nil when every list is empty; else {list, message}, recorded as kombu records a
-- delivery, or {list, message, 0} when the message is not an object with a delivery tag
-- and delivery info (not recorded: the caller's own path handles it).
for _, tag in ipairs(acks) do
  redis.call('ZREM', each_keys[1].unacked_index, tag)
  redis.call('HDEL', each_keys[1].unacked, tag)
end
for _, queue in ipairs(each_keys) do
  local message = redis.call('RPOP', queue.list)
  if message then
    local ok, decoded = pcall(cjson.decode, message)
    local properties = ok and type(decoded) == 'table' and decoded.properties
    if type(properties) ~= 'table' then return {queue.list, message, 0} end
    local tag, info = properties.delivery_tag, properties.delivery_info
    if type(tag) ~= 'string' or type(info) ~= 'table' then return {queue.list, message, 0} end
    local exchange, routing_key = info.exchange or '', info.routing_key or ''
    redis.call('ZADD', queue.unacked_index, now, tag)
    redis.call('HSET', queue.unacked, tag,
      '[' .. message .. ',' .. cjson.encode(exchange) .. ',' .. cjson.encode(routing_key) .. ']')
    return {queue.list, message}
  end
end
return nil
