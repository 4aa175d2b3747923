-- Puts one webhook event in the outbox when some endpoint is registered (outbox_add, from
-- webhook_outbox.lua, run alone).
-- KEYS[1] endpoints: HASH of registered endpoints
-- KEYS[2] outbox: STREAM the dispatcher reads
-- ARGV[1] event: the WebhookEvent, JSON
-- ARGV[2] maxlen: the outbox's MAXLEN ~
-- Returns 1 if the event was kept.
return outbox_add(endpoints_key, outbox_key, event, maxlen)
