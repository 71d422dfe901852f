-- A pod starts draining (platform §5): placement skips it from this instant; gateways get a hint.
-- KEYS: the index keys (index.lua).  ARGV: pod prefix, resv prefix, pod, events channel.
-- Publishes the pod name on the pool's events channel. Returns 1 if the hash existed, else 0.
local pod = ARGV[3]
local exists = redis.call('EXISTS', POD_PREFIX .. pod)
if exists == 1 then
  redis.call('HSET', POD_PREFIX .. pod, 'draining', '1')
end
reindex(pod, now_ms())
redis.call('PUBLISH', ARGV[4], pod)
return exists
