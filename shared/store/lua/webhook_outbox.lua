-- outbox_add(endpoints, outbox, event, maxlen): puts one webhook event in the outbox, only
-- when some endpoint is registered, so emitting costs nothing but this call (made by the
-- script or pipeline of the write that caused the event). Returns 1 if the event was kept.
--   endpoints: the HASH of registered endpoints; outbox: the STREAM the dispatcher reads;
--   event: the WebhookEvent, JSON
local function outbox_add(endpoints, outbox, event, maxlen)
  if redis.call('EXISTS', endpoints) == 0 then return 0 end
  redis.call('XADD', outbox, 'MAXLEN', '~', maxlen, '*', 'event', event)
  return 1
end
