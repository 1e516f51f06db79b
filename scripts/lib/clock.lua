-- clock.lua: the server's clock, read once per call and only when needed (a
-- plain acquire or release reads none). Every deadline comes from it, never
-- from a client's clock.
local clock

-- nowMs is the server's time in milliseconds.
local function nowMs()
  if not clock then clock = redis.call('TIME') end
  return clock[1] * 1000 + math.floor(clock[2] / 1000)
end
