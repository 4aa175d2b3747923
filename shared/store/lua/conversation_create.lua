-- Creates a conversation unless its id is taken (ConversationStore.queue_create).
-- KEYS[1] conversation: HASH, the conversation
-- ARGV[1] config: JSON, its ConversationConfig
-- ARGV[2] now: s
-- ARGV[3] policy: its double-text policy
-- ARGV[4] owner: who created it
-- ARGV[5] held: '1' while no worker may start its turns
-- Returns 1 created, 0 the id is taken.
if redis.call('HSETNX', conversation_key, 'config', config) == 0 then return 0 end
redis.call('HSET', conversation_key, 'status', 'idle', 'closed', '0', 'created_at', now,
           'updated_at', now, 'active_turn', '', 'policy', policy, 'owner', owner)
if held == '1' then redis.call('HSET', conversation_key, 'held', '1') end
return 1
