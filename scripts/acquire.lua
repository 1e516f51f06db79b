-- acquire.lua: take the permits if they are free and nobody waits, else
-- queue up. go-redis never sends it twice: a copy held in the network
-- could come after a retry was answered, and queue a token nobody waits
-- with. When the answer is lost, its caller asks recover.lua.
-- KEYS: see lib/keys.lua; ARGV[1..5] as there, then
-- ARGV[6] token, ARGV[7] "try" (never queue), "wait" (queue), or "count"
-- (queue and count the place), ARGV[8] the caller's metadata or "",
-- ARGV[9] the capacity ("" for a mutex), ARGV[10] the group limit (0:
-- none), ARGV[11] the group or "", ARGV[12] the group's weight (1 to
-- 1000), and, when the caller opens its session with this call, ARGV[13]
-- its lease TTL, ARGV[14] its waiter TTL and ARGV[15] the TTL of its
-- grants' records, in ms.
-- Reply: an integer: the fence (> 0) if granted; 0 if not granted and not
-- queued ("try"); if queued, -place under "count" (1 is next), else -1.
-- Errors: ERR_SESSION_GONE if the caller's session is gone,
-- ERR_WITHDRAWN if its caller withdrew token already, and
-- ERR_CAPACITY, then the capacity and the limit, if the semaphore is in
-- use with another capacity or group limit; then nothing changed.
local token, mode, meta, group, groupWeight = ARGV[6], ARGV[7], ARGV[8], ARGV[11], ARGV[12]
if ARGV[13] then openSession(token, ARGV[13], ARGV[14], ARGV[15]) end
-- A request that reaches Redis after its caller withdrew (cancel.lua)
-- changes nothing.
if withdrawn(token) then return redis.error_reply('ERR_WITHDRAWN') end
local ttl = grantTTL(token)
if not ttl then return redis.error_reply('ERR_SESSION_GONE') end
local freed, err = openStore(tonumber(ARGV[9]), tonumber(ARGV[10]), true)
if err then return err end

-- storeMeta keeps the caller's metadata, if any, under token as long as
-- the lock's keys.
local function storeMeta()
  if meta == '' then return end
  redis.call('HSET', metaKey, token, meta)
  keepFor(metaKey, keepTTL, true)
end

-- Free permits with nobody waiting are taken at once. Permits that an
-- expired or dead holder left go to the waiters first: nobody jumps the
-- queue.
local function takeNow()
  if freed then grantHeads() end
  if not fits(token, group) or waiting() > 0 then return false end
  join(token, group, permitsHeld(), groupWeight)
  local fence = nextFence()
  take(token, group, ttl, fence)
  return fence
end

-- A try must not fail for a holder or waiter that died: the scan finds
-- them. A call that queues leaves the scan to its heartbeats.
local fence = takeNow()
if not fence and mode == 'try' and maintain() then
  freed = true
  fence = takeNow()
end
if fence then
  storeMeta()
  return fence
end
if mode == 'try' then
  settle()
  return 0
end
enqueue(token, group, permitsHeld(), groupWeight)
storeMeta()
-- Room with waiters queued (their groups at their limits, or dead waiters
-- at the head) goes to the heads now, this one's turn included: it must
-- not wait for a heartbeat.
if grantHeads(token) and holds(token) then return fenceOf(token) end
if mode == 'count' then return -placeOf(token) end
return -1
