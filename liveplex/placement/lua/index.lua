-- Prepended (after now.lua) to every script that changes a pod: the pool's index, kept by every writer,
-- so that a placement reads O(log N) of it instead of every pod (docs/placement.md, "The index").
-- KEYS: members, room, expiry, counted, totals.  ARGV[1], ARGV[2]: pod prefix, resv prefix.
--   room     ZSET pod -> room_score(free, degraded): the members with a hash, not draining, free > 0
--   expiry   ZSET pod -> its earliest lease expiry (ms): when its free slots next grow by themselves
--   counted  HASH pod -> 'capacity active': what the pod adds to the busy totals (members with a hash,
--            not draining); kept apart from the pod hash, which may expire before the pod is pruned
--   totals   HASH capacity, active, engines: the sums over `counted`
-- The index only steers: place.lua checks its pick against the pod's hash and leases before reserving.
local MEMBERS, ROOM, EXPIRY, COUNTED, TOTALS = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5]
local POD_PREFIX, RESV_PREFIX = ARGV[1], ARGV[2]
local DEGRADED = 4294967296  -- 2^32: every degraded pod ranks above (after) every healthy one

local function room_score(free, degraded)
  return free + (degraded and DEGRADED or 0)
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
  local counts = (member and h[1] and h[3] ~= '1') and (h[1] .. ' ' .. h[2]) or nil
  local old = redis.call('HGET', COUNTED, pod)
  if old ~= counts then
    local cap, act, engines = 0, 0, 0
    if old then
      local c, a = string.match(old, '^(%d+) (%d+)$')
      cap, act, engines = 0 - tonumber(c), 0 - tonumber(a), -1  -- never -0, which HINCRBY refuses
      redis.call('HDEL', COUNTED, pod)
    end
    if counts then
      cap, act, engines = cap + tonumber(h[1]), act + tonumber(h[2]), engines + 1
      redis.call('HSET', COUNTED, pod, counts)
    end
    redis.call('HINCRBY', TOTALS, 'capacity', cap)
    redis.call('HINCRBY', TOTALS, 'active', act)
    redis.call('HINCRBY', TOTALS, 'engines', engines)
  end
  local free = counts and (tonumber(h[1]) - tonumber(h[2]) - redis.call('ZCARD', resv)) or 0
  if free > 0 then
    redis.call('ZADD', ROOM, room_score(free, h[4] == '1'), pod)
  else
    redis.call('ZREM', ROOM, pod)
  end
end
