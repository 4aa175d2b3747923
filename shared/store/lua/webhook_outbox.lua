-- Puts one webhook event in the outbox, only when some endpoint is registered: emitting
-- costs nothing but this command (sent in the pipeline of the write that caused the event).
local endpoints = KEYS[1]  -- HASH of registered endpoints
local outbox = KEYS[2]     -- STREAM the dispatcher reads
local event = ARGV[1]      -- the WebhookEvent, JSON
local maxlen = ARGV[2]

if redis.call('EXISTS', endpoints) == 0 then return 0 end
redis.call('XADD', outbox, 'MAXLEN', '~', maxlen, '*', 'event', event)
return 1
