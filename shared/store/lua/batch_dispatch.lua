-- dispatch(meta, states, queue, releasing, resuming): a free place under the batch's cap
-- goes first to a resumed item (its approval settled, waiting in `resuming`, oldest first),
-- then to a queued one: each is marked running and put in `releasing` until its
-- conversation is released (outside the script: another slot).
local function dispatch(meta, states, queue, releasing, resuming)
  -- A batch whose budget (`limit:<unit>`, shared/store/budgets.py) is spent or reserved to
  -- its end, or that refused a call for want of room (worker/lua/reserve.lua), dispatches
  -- nothing and says so in `held` ("budget:<unit>"); raising the budget clears it and resumes.
  local function budget_spent(meta)
    local held = redis.call('HGET', meta, 'held')
    if held then return string.sub(held, 8) end
    for _, unit in ipairs({'tokens', 'micros'}) do
      local limit = redis.call('HGET', meta, 'limit:' .. unit)
      if limit then
        local used = tonumber(redis.call('HGET', meta, 'spent:' .. unit) or '0')
          + tonumber(redis.call('HGET', meta, 'reserved:' .. unit) or '0')
        if used >= tonumber(limit) then return unit end
      end
    end
    return nil
  end
  if redis.call('HGET', meta, 'status') == 'cancelled' then return end
  local spent = budget_spent(meta)
  if spent then
    redis.call('HSET', meta, 'held', 'budget:' .. spent)
    return
  end
  local cap = tonumber(redis.call('HGET', meta, 'max_concurrency') or '1')
  while tonumber(redis.call('HGET', meta, 'count:running') or '0') < cap do
    local next_id = redis.call('LPOP', resuming)
    local from = 'waiting'
    if not next_id then
      next_id, from = redis.call('LPOP', queue), 'queued'
      if not next_id then break end
    end
    if redis.call('HGET', states, next_id) == from then
      redis.call('HSET', states, next_id, 'running')
      redis.call('HINCRBY', meta, 'count:' .. from, -1)
      redis.call('HINCRBY', meta, 'count:running', 1)
      redis.call('SADD', releasing, next_id)
    end
  end
end
