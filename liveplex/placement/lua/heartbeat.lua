-- An engine pod's heartbeat (platform §6.3): its members score, its hash's TTL, and what changed.
-- KEYS: the index keys (index.lua).  ARGV: pod prefix, resv prefix, pod, ttl_ms, whole ('1' | '0'),
-- then field, value, ...: capacity, active, draining, degraded first, in that order (every beat: what
-- placement reads, and the correction for a settle that failed), then the other fields that changed
-- since the pod's last beat (every field when whole).
-- Returns the pod's unexpired reservations (its `liveplex_engine_sessions_reserved`), or -1, writing
-- nothing, when a partial beat finds no record: Redis lost it (restart, TTL) and wants the whole one.
-- The index is re-derived on a whole beat (a pod's first, or after Redis lost its record: this also
-- indexes a pool written before the index existed), when the pod joins, or when what placement reads
-- changed: a steady beat is the score, the TTL and the four placement fields.
local now = now_ms()
local pod = ARGV[3]
local hash = POD_PREFIX .. pod
local before = redis.call('HMGET', hash, 'capacity', 'active', 'draining', 'degraded')
if ARGV[5] ~= '1' and not before[1] then
  return -1
end
redis.call('HSET', hash, unpack(ARGV, 6))
redis.call('PEXPIRE', hash, ARGV[4])
local joined = redis.call('ZADD', MEMBERS, now, pod)
if ARGV[5] == '1' or joined == 1 or before[1] ~= ARGV[7] or before[2] ~= ARGV[9] or before[3] ~= ARGV[11]
    or before[4] ~= ARGV[13] then
  reindex(pod, now)
end
return redis.call('ZCOUNT', RESV_PREFIX .. pod, now, '+inf')
