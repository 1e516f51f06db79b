-- queue.lua: the mutex's queue: one FIFO line per priority
-- (lib/lanes.lua); lib/counted/queue.lua is the semaphore's, with groups.
-- Every queue defines:
--   join(token, group, held, weight)
--                                a request that names group (with its
--                                weight) joins the lock's parties (held:
--                                the permits held now), queued or taken
--                                at once
--   enqueue(token, group, held, weight)
--                                join, and wait at the back of its line
--   nextHead()                   the waiter to be granted next and its
--                                group, or nil; it stays queued until
--                                popHead
--   popHead(token, group)        take the head nextHead named off the queue
--   waiterLeft(token, group)     a waiter popped dead, or withdrawn: forget
--                                the rest of it
--   leave(token)                 take token off the queue wherever it
--                                stands; returns whether it was queued
--   groupOf(token)               the group a queued token named ("": none)
--   lineOf(token, group)         the list a waiter of group waits in
--   keepQueue()                  keep the queue's keys keepTTL ms more
--   keepLine(token)              keep a waiter's line keepTTL ms more
--   chargeHolds()                charge the holders' groups for the time
--                                held so far (the scan's)
--   mendGroups()                 mend what a rollback tore in the groups'
--                                keys (the scan's)
-- and this one also emptied(anyway): did this call take the last waiter
-- off (with anyway, is nobody waiting).
--   setGrouping(parties, limit)  the groups' state, read by openStore

local function setGrouping() end

local function join() end

local function enqueue(token)
  local lane = laneOf(token)
  arrive(laneKey(lane), token, lane)
end

-- Whether this call took waiters off the queue, for emptied.
local tookOff = false

-- A waiter whose line expired before orderKey (only its own Locker keeps
-- its line, every Locker orderKey: a dead waiter's line can go first) is
-- the head once no line has one, so that the grant loop drops it.
local function nextHead()
  local first, score = firstWaiter()
  if not first then return nil end
  if score >= 0 then return first, '' end
  return pickLane(function(lane) return peek(laneKey(lane)), '' end) or first, ''
end

local function popHead(token)
  pop(laneKey(laneOf(token)), token)
  depart(token)
  tookOff = true
end

local function waiterLeft(token) redis.call('HDEL', metaKey, token) end

local function leave(token)
  depart(token)
  local left = redis.call('LREM', laneKey(laneOf(token)), 1, token) == 1
  tookOff = tookOff or left
  return left
end

-- emptied costs a command only after waiters were taken off, or when
-- asked anyway: never on an uncontended release.
local function emptied(anyway) return (tookOff or anyway) and waiting() == 0 end

local function groupOf() return '' end

local function chargeHolds() end

local function mendGroups() end

local function lineOf(token) return laneKey(laneOf(token)) end

local function keepQueue()
  keepFor(queueKey, keepTTL, false)
  keepFor(orderKey, keepTTL, false)
end

-- keepLine keeps each line once per call.
local linesKept = {}
local function keepLine(token)
  local line = lineOf(token)
  if linesKept[line] then return end
  keepFor(line, keepTTL, false)
  linesKept[line] = true
end
