-- Read a pool at one instant, writing nothing (`snapshot.Snapshot`).
-- KEYS: members.  ARGV: pod prefix, resv prefix.
-- Returns {now_ms, {pod, heartbeat_ms, unexpired reservations, JSON [field, value, ...]}, ...} in ZRANGE
-- order; members whose hash expired are left out. The fields travel as one JSON string: a client
-- parses one value per pod instead of twenty.
local now = now_ms()
local out = {now}
local rows = redis.call('ZRANGE', KEYS[1], 0, -1, 'WITHSCORES')
for i = 1, #rows, 2 do
  local pod = rows[i]
  local fields = redis.call('HGETALL', ARGV[1] .. pod)
  if #fields > 0 then
    out[#out + 1] = {pod, rows[i + 1], redis.call('ZCOUNT', ARGV[2] .. pod, now, '+inf'), cjson.encode(fields)}
  end
end
return out
