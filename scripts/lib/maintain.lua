-- maintain.lua: drop the parties whose session died, wherever they stand,
-- at most once per heartbeat of the caller (ARGV[5], ms) per lock however
-- many Lockers call. A dead waiter at the head is dropped by the grant loop
-- at once; the scan finds the rest, so that places and counts are right
-- within a heartbeat. The permits of a dead semaphore holder come free at
-- the next scan or waiter's heartbeat.

local scanEvery = tonumber(ARGV[5])

-- scanDue tells whether this call scans, and if so books the next scan, a
-- quarter of a heartbeat early: the caller's next heartbeat, which timer
-- jitter can bring a little early, must find it due, or a dead party would
-- wait for the one after.
local function scanDue()
  local at = tonumber(redis.call('HGET', stateKey, 'scanAt'))
  if at and at > nowMs() then return false end
  redis.call('HSET', stateKey, 'scanAt', nowMs() + math.floor(scanEvery * 3 / 4))
  keepState(true)
  return true
end

-- reapWaiters drops the dead among SCAN_WAITERS waiters in arrival order,
-- from where the last scan stopped, so that a huge queue never holds Redis
-- long.
local function reapWaiters()
  local from = tonumber(redis.call('HGET', stateKey, 'scanFrom')) or 0
  local tokens = redis.call('ZRANGE', orderKey, from, from + SCAN_WAITERS - 1)
  local lines, dead = {}, {}
  for _, token in ipairs(tokens) do
    if not grantTTL(token) then
      local group = groupOf(token)
      local key = lineOf(token, group)
      local line = lines[key]
      if not line then
        line = {set = {}, n = 0}
        lines[key] = line
      end
      line.set[token], line.n = true, line.n + 1
      dead[#dead + 1] = {token, group}
    end
  end
  for key, line in pairs(lines) do purge(key, line.set, line.n) end
  for _, d in ipairs(dead) do
    depart(d[1])
    waiterLeft(d[1], d[2])
  end
  local nextFrom = from + #tokens - #dead
  if #tokens < SCAN_WAITERS then nextFrom = 0 end
  redis.call('HSET', stateKey, 'scanFrom', nextFrom)
end

-- maintain scans when it is due, and then charges the groups for their
-- holds (chargeHolds); returns whether permits came free. With
-- everyHolder (a heartbeat) it looks at the holders whatever the scan's
-- schedule: they are few, and a dead one keeps every waiter waiting, so a
-- waiter's next heartbeat after a holder's session died must find it.
local function maintain(everyHolder)
  local due = scanDue()
  local freed = false
  if due or everyHolder then freed = reapHolders() end
  if due then
    reapWaiters()
    chargeHolds()
    mendGroups()
  end
  return freed
end
