-- Prepended (after now.lua) to every script that changes a pod: the pool's index, kept by every writer,
-- so that a placement reads O(log N) of it instead of every pod (docs/placement.md, "The index").
-- KEYS: members, room, expiry, counted, totals.  ARGV[1], ARGV[2]: pod prefix, resv prefix.
--   room     ZSET pod -> room_score(free, degraded): the members with a hash, not draining, free > 0
--   expiry   ZSET pod -> its earliest lease expiry (ms): when its free slots next grow by themselves
--   counted  HASH pod -> 'capacity active reserved draining': what the pod adds to the totals (every
--            member with a hash); kept apart from the pod hash, which may expire before the pod is pruned
--   totals   HASH over `counted`: capacity, active, engines (pods not draining: the busy answer),
--            reserved (leases as of each pod's last change), draining, draining_active
-- The index only steers: place.lua checks its pick against the pod's hash and leases before reserving.
local MEMBERS, ROOM, EXPIRY, COUNTED, TOTALS = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5]
local POD_PREFIX, RESV_PREFIX = ARGV[1], ARGV[2]
local DEGRADED = 4294967296  -- 2^32: every degraded pod ranks above (after) every healthy one

local function room_score(free, degraded)
  return free + (degraded and DEGRADED or 0)
end

local FIELDS = {'capacity', 'active', 'engines', 'reserved', 'draining', 'draining_active'}

-- A pod's part of each `totals` field, from its `counted` value (nil: none).
local function parts(counts)
  if not counts then
    return {0, 0, 0, 0, 0, 0}
  end
  local c, a, r, d = string.match(counts, '^(%d+) (%d+) (%d+) (%d)$')
  c, a, r = tonumber(c), tonumber(a), tonumber(r)
  if d == '1' then
    return {0, 0, 0, r, 1, a}
  end
  return {c, a, 1, r, 0, 0}
end

-- What the index holds about `pod`, re-derived from the truth: membership, hash, unexpired leases.
local function reindex(pod, now)
  local resv = RESV_PREFIX .. pod
  redis.call('ZREMRANGEBYSCORE', resv, '-inf', '(' .. now)
  local member = redis.call('ZSCORE', MEMBERS, pod)
  local first = redis.call('ZRANGE', resv, 0, 0, 'WITHSCORES')
  if member and first[2] then
    redis.call('ZADD', EXPIRY, first[2], pod)
  else
    redis.call('ZREM', EXPIRY, pod)
  end
  local h = redis.call('HMGET', POD_PREFIX .. pod, 'capacity', 'active', 'draining', 'degraded')
  local reserved = redis.call('ZCARD', resv)
  local counts = nil
  if member and h[1] then
    counts = h[1] .. ' ' .. h[2] .. ' ' .. reserved .. ' ' .. ((h[3] == '1') and '1' or '0')
  end
  local old = redis.call('HGET', COUNTED, pod)
  if old ~= counts then
    if counts then
      redis.call('HSET', COUNTED, pod, counts)
    else
      redis.call('HDEL', COUNTED, pod)
    end
    local before, after = parts(old), parts(counts)
    for i, field in ipairs(FIELDS) do
      if after[i] ~= before[i] then
        redis.call('HINCRBY', TOTALS, field, after[i] - before[i])
      end
    end
  end
  local free = (counts and h[3] ~= '1') and (tonumber(h[1]) - tonumber(h[2]) - reserved) or 0
  if free > 0 then
    redis.call('ZADD', ROOM, room_score(free, h[4] == '1'), pod)
  else
    redis.call('ZREM', ROOM, pod)
  end
end

-- Time's own changes, at most `limit` of each: pods that stopped heartbeating leave the pool, pods
-- whose leases expired get their slots back.
local function catch_up(now, stale_ms, limit)
  local oldest = now - stale_ms
  for _, pod in ipairs(redis.call('ZRANGEBYSCORE', MEMBERS, '-inf', '(' .. oldest, 'LIMIT', 0, limit)) do
    redis.call('ZREM', MEMBERS, pod)
    reindex(pod, now)
  end
  for _, pod in ipairs(redis.call('ZRANGEBYSCORE', EXPIRY, '-inf', '(' .. now, 'LIMIT', 0, limit)) do
    reindex(pod, now)
  end
end
