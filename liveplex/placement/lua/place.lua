-- Pick and reserve a slot in one atomic step (platform §6.4); `choice.choose` is its Python twin.
-- KEYS: the index keys (index.lua).  ARGV: pod prefix, resv prefix, session id, lease_ms, stale_ms,
-- tiebreak, mode ('spread' | 'pack'), then the excluded pods.
-- Returns {'placed', pod, addr} or {'busy', total capacity, total active, no_engines (1|0)}.
-- O(log N) in the pool: it reads the `room` index (index.lua), never every pod. Time's own changes
-- (stale pods, expired leases) are applied PRUNE at a time per call; the pick is checked against the
-- pod's hash, heartbeat and leases before it is trusted, so a lagging index can steer a placement
-- but never overbook a pod.
local PRUNE, FIXES = 16, 64
local now = now_ms()
local session, lease_ms, stale_ms = ARGV[3], tonumber(ARGV[4]), tonumber(ARGV[5])
local tiebreak, spread = tonumber(ARGV[6]), ARGV[7] == 'spread'
local oldest = now - stale_ms

-- 1. time has passed: stale pods leave the pool, pods whose leases expired have room again
catch_up(now, stale_ms, PRUNE)

-- 2. excluded pods step out of the index for this call (they still count as engines)
local excluded, seen, out_capacity, out_active = {}, {}, 0, 0
for i = 8, #ARGV do
  local pod = ARGV[i]
  if not seen[pod] then
    seen[pod] = true
    local score = redis.call('ZSCORE', ROOM, pod)
    if score then
      excluded[#excluded + 1] = {score, pod}
      redis.call('ZREM', ROOM, pod)
    end
    local part = parts(redis.call('HGET', COUNTED, pod))
    out_capacity, out_active = out_capacity + part[1], out_active + part[2]
  end
end

-- 3. the best rank: healthy before degraded, then most free (spread) or least free (pack); ties
--    in pod-name order (ZSET order of equal scores), one of them by the tiebreak
local function best()
  local top
  if spread then
    top = redis.call('ZREVRANGEBYSCORE', ROOM, '(' .. DEGRADED, '-inf', 'WITHSCORES', 'LIMIT', 0, 1)
    if #top == 0 then
      top = redis.call('ZREVRANGE', ROOM, 0, 0, 'WITHSCORES')
    end
  else
    top = redis.call('ZRANGE', ROOM, 0, 0, 'WITHSCORES')
  end
  if #top == 0 then
    return nil
  end
  local first = redis.call('ZCOUNT', ROOM, '-inf', '(' .. top[2])
  local ties = redis.call('ZCOUNT', ROOM, top[2], top[2])
  local rank = first + tiebreak % ties
  return redis.call('ZRANGE', ROOM, rank, rank)[1], tonumber(top[2])
end

-- 4. trust but verify: fresh, a hash, not draining, and the room the index says; else fix and retry
--    (at most FIXES times: an index that wrong answers busy rather than holding Redis)
local chosen
for _ = 1, FIXES do
  local pod, score = best()
  if not pod then
    break
  end
  local h = redis.call('HMGET', POD_PREFIX .. pod, 'capacity', 'active', 'draining', 'degraded', 'addr')
  local heartbeat = redis.call('ZSCORE', MEMBERS, pod)
  if not h[1] or not heartbeat or tonumber(heartbeat) < oldest then
    redis.call('ZREM', MEMBERS, pod)  -- its hash expired or it went stale: the pod is gone
  elseif h[3] ~= '1' then
    local free = tonumber(h[1]) - tonumber(h[2]) - redis.call('ZCOUNT', RESV_PREFIX .. pod, now, '+inf')
    if free > 0 and room_score(free, h[4] == '1') == score then
      chosen = {pod, h[5]}
      break
    end
  end
  reindex(pod, now)
end

for _, entry in ipairs(excluded) do
  redis.call('ZADD', ROOM, entry[1], entry[2])
end
if not chosen then
  local totals = redis.call('HMGET', TOTALS, 'capacity', 'active', 'engines')
  local engines = tonumber(totals[3] or 0)
  return {'busy', tonumber(totals[1] or 0) - out_capacity, tonumber(totals[2] or 0) - out_active,
          (engines == 0) and 1 or 0}
end
-- 5. reserve
local resv = RESV_PREFIX .. chosen[1]
redis.call('ZADD', resv, now + lease_ms, session)
redis.call('PEXPIRE', resv, lease_ms + stale_ms)
reindex(chosen[1], now)
return {'placed', chosen[1], chosen[2]}
