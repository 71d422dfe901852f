-- The engine settles a session (platform §6.3): accept, release, end of session, or a gateway's unreserve.
-- Dropping the lease and writing the engine's count happen together, so a started session is counted
-- exactly once: in `active` from this instant, no longer among the reservations.
-- KEYS: the index keys (index.lua).  ARGV: pod prefix, resv prefix, pod, session id ('' for none),
-- active ('' to leave it).
-- Returns 1 if a reservation was dropped, else 0. `active` is written only into an existing hash: a
-- pod whose hash expired is re-created whole by its next heartbeat, never as a partial record.
local now = now_ms()
local pod = ARGV[3]
local dropped = 0
if ARGV[4] ~= '' then
  dropped = redis.call('ZREM', RESV_PREFIX .. pod, ARGV[4])
end
if ARGV[5] ~= '' and redis.call('EXISTS', POD_PREFIX .. pod) == 1 then
  redis.call('HSET', POD_PREFIX .. pod, 'active', ARGV[5])
end
reindex(pod, now)
return dropped
