-- The engine settles a session (platform §6.3): accept, release, end of session, or a gateway's unreserve.
-- Dropping the lease and writing the engine's count happen together, so a started session is counted
-- exactly once: in `active` from this instant, no longer among the reservations.
-- KEYS: resv zset, pod hash.  ARGV: session id ('' for none), active ('' to leave it).
-- Returns 1 if a reservation was dropped, else 0. `active` is written only into an existing hash: a
-- pod whose hash expired is re-created whole by its next heartbeat, never as a partial record.
local dropped = 0
if ARGV[1] ~= '' then
  dropped = redis.call('ZREM', KEYS[1], ARGV[1])
end
if ARGV[2] ~= '' and redis.call('EXISTS', KEYS[2]) == 1 then
  redis.call('HSET', KEYS[2], 'active', ARGV[2])
end
return dropped
