-- A pod's clean exit: its hash, reservations and membership go at once instead of by TTL.
-- KEYS: the index keys (index.lua).  ARGV: pod prefix, resv prefix, pod.
local pod = ARGV[3]
redis.call('DEL', POD_PREFIX .. pod, RESV_PREFIX .. pod)
redis.call('ZREM', MEMBERS, pod)
reindex(pod, now_ms())
return 1
