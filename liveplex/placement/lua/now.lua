-- Prepended to every placement script: time comes only from Redis TIME, never from a client clock.
local function now_ms()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end
