-- An engine pod's heartbeat (platform §6.3): its hash with a TTL, then its members score.
-- KEYS: pod hash, members, pod's reservations.  ARGV: pod, ttl_ms, then field, value, field, value, ...
-- Returns the pod's unexpired reservations (its `liveengine_sessions_reserved`).
local now = now_ms()
redis.call('HSET', KEYS[1], unpack(ARGV, 3))
redis.call('PEXPIRE', KEYS[1], ARGV[2])
redis.call('ZADD', KEYS[2], now, ARGV[1])
return redis.call('ZCOUNT', KEYS[3], now, '+inf')
