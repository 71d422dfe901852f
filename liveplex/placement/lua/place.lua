-- Pick and reserve a slot in one atomic step (platform §6.4); `choice.choose` is its Python twin.
-- KEYS: members.  ARGV: pod prefix, resv prefix, session id, lease_ms, stale_ms, tiebreak, mode
-- ('spread' | 'pack'), then the excluded pods.
-- Returns {'placed', pod, addr} or {'busy', total capacity, total active, no_engines (1|0)}.
-- Per-pod keys are built from the prefixes: they share the pool's hash slot (accepted deviation).
local now = now_ms()
local members, pod_prefix, resv_prefix = KEYS[1], ARGV[1], ARGV[2]
local lease_ms, stale_ms = tonumber(ARGV[4]), tonumber(ARGV[5])
local spread = ARGV[7] == 'spread'
local excluded = {}
for i = 8, #ARGV do
  excluded[ARGV[i]] = true
end

redis.call('ZREMRANGEBYSCORE', members, '-inf', string.format('(%d', now - stale_ms))
local best_degraded, best_score, ties = nil, nil, {}
local capacity, active, engines = 0, 0, 0
for _, pod in ipairs(redis.call('ZRANGE', members, 0, -1)) do
  local h = redis.call('HMGET', pod_prefix .. pod, 'capacity', 'active', 'draining', 'degraded', 'addr')
  if not h[1] then
    redis.call('ZREM', members, pod)  -- its hash expired: the pod is gone
  elseif h[3] ~= '1' then
    engines = engines + 1
    if not excluded[pod] then
      local cap, act = tonumber(h[1]), tonumber(h[2])
      capacity, active = capacity + cap, active + act
      -- expired leases do not count; they are dropped from the pod that takes the next lease below
      local free = cap - act - redis.call('ZCOUNT', resv_prefix .. pod, now, '+inf')
      if free > 0 then
        -- lower ranks first: healthy before degraded, then most free (spread) or least free (pack)
        local degraded = (h[4] == '1') and 1 or 0
        local score = spread and -free or free
        if best_degraded == nil or degraded < best_degraded
            or (degraded == best_degraded and score < best_score) then
          best_degraded, best_score, ties = degraded, score, {{pod, h[5]}}
        elseif degraded == best_degraded and score == best_score then
          ties[#ties + 1] = {pod, h[5]}
        end
      end
    end
  end
end

if #ties == 0 then
  return {'busy', capacity, active, (engines == 0) and 1 or 0}
end
local chosen = ties[(tonumber(ARGV[6]) % #ties) + 1]
local resv = resv_prefix .. chosen[1]
redis.call('ZREMRANGEBYSCORE', resv, '-inf', string.format('(%d', now))
redis.call('ZADD', resv, now + lease_ms, ARGV[3])
redis.call('PEXPIRE', resv, lease_ms + stale_ms)
return {'placed', chosen[1], chosen[2]}
