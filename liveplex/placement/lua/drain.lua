-- A pod starts draining (platform §5): placement skips it from this instant; gateways get a hint.
-- KEYS: pod hash.  ARGV: events channel, pod.
-- Publishes the pod name on the pool's events channel. Returns 1 if the hash existed, else 0.
local exists = redis.call('EXISTS', KEYS[1])
if exists == 1 then
  redis.call('HSET', KEYS[1], 'draining', '1')
end
redis.call('PUBLISH', ARGV[1], ARGV[2])
return exists
