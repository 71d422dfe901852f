-- A pool's totals and its best K candidates, for gateways (`client.summary`): O(K log N), not O(pods).
-- KEYS: the index keys (index.lua).  ARGV: pod prefix, resv prefix, stale_ms, K.
-- Applies time's changes first (a bounded amount, as place.lua does), so a pool nobody places on
-- still sheds its dead pods. Returns {now_ms, {capacity, active, engines, reserved, draining,
-- draining_active, degraded pods with room}, {pod, heartbeat_ms, unexpired leases, JSON [field, value,
-- ...]}, ...}: the candidates in spread order (healthy first, then most free). The fields travel as one
-- JSON string: a client parses one value instead of twenty.
local PRUNE = 16
local now = now_ms()
local k = tonumber(ARGV[4])
catch_up(now, tonumber(ARGV[3]), PRUNE)
local totals = redis.call('HMGET', TOTALS, 'capacity', 'active', 'engines', 'reserved', 'draining', 'draining_active')
for i = 1, #totals do
  totals[i] = tonumber(totals[i] or 0)
end
totals[#totals + 1] = redis.call('ZCOUNT', ROOM, '(' .. DEGRADED, '+inf')
local pods = redis.call('ZREVRANGEBYSCORE', ROOM, '(' .. DEGRADED, '-inf', 'LIMIT', 0, k)
if #pods < k then
  for _, pod in ipairs(redis.call('ZREVRANGEBYSCORE', ROOM, '+inf', '(' .. DEGRADED, 'LIMIT', 0, k - #pods)) do
    pods[#pods + 1] = pod
  end
end
local out = {now, totals}
for _, pod in ipairs(pods) do
  local fields = redis.call('HGETALL', POD_PREFIX .. pod)
  if #fields > 0 then
    out[#out + 1] = {pod, redis.call('ZSCORE', MEMBERS, pod) or '0',
                     redis.call('ZCOUNT', RESV_PREFIX .. pod, now, '+inf'), cjson.encode(fields)}
  end
end
return out
