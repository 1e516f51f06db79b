-- clock.lua: the server's clock, read once per call and only when needed.
-- Every deadline comes from it, never from a client's clock; time stands
-- still during a script, so one reading serves the whole call.
local timeReading
local function serverTime()
  if not timeReading then timeReading = redis.call('TIME') end
  return timeReading
end

local function nowMs()
  local t = serverTime()
  return t[1] * 1000 + math.floor(t[2] / 1000)
end

local function nowUs()
  local t = serverTime()
  return t[1] * 1000000 + t[2]
end
