-- An engine pod's heartbeat (platform §6.3): its hash with a TTL, then its members score.
-- KEYS: the index keys (index.lua).  ARGV: pod prefix, resv prefix, pod, ttl_ms, then field, value, ...
-- Returns the pod's unexpired reservations (its `liveengine_sessions_reserved`).
-- The index is re-derived only when the pod joins or a field placement reads changed: a steady
-- beat is the hash, its TTL and the members score.
local now = now_ms()
local pod = ARGV[3]
local hash = POD_PREFIX .. pod
local before = redis.call('HMGET', hash, 'capacity', 'active', 'draining', 'degraded')
redis.call('HSET', hash, unpack(ARGV, 5))
redis.call('PEXPIRE', hash, ARGV[4])
local joined = redis.call('ZADD', MEMBERS, now, pod)
local after = redis.call('HMGET', hash, 'capacity', 'active', 'draining', 'degraded')
if joined == 1 or before[1] ~= after[1] or before[2] ~= after[2] or before[3] ~= after[3]
    or before[4] ~= after[4] then
  reindex(pod, now)
end
return redis.call('ZCOUNT', RESV_PREFIX .. pod, now, '+inf')
