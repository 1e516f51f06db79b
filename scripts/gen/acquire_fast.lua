-- clock.lua: the server's clock, read once per call and only when needed.
-- Every deadline comes from it, never from a client's clock; time stands
-- still during a script, so one reading serves the whole call.
local timeReading
local function serverTime()
  if not timeReading then timeReading = redis.call('TIME') end
  return timeReading
end

local function nowUs()
  local t = serverTime()
  return t[1] * 1000000 + t[2]
end
-- fence.lua: fencing tokens.

-- drawFence returns the next fence of the counter at key: one above the
-- last, and at least the server's time in µs. A counter alone would hand a
-- fence out twice after Redis rolled back (a failover to a replica that
-- missed the last grants, a restart from an older snapshot) and kept an
-- older count; the clock keeps fences growing across such a loss, and
-- across the loss of the key, as long as the clock of the server that
-- grants after it is ahead of the one that granted before (by more than
-- the grants one call made: time stands still in a call). The key lives a
-- day (scripts.FenceTTLMs) after the last grant.
local function drawFence(key)
  local fence = math.max(tonumber(redis.call('GET', key) or '0') + 1, nowUs())
  redis.call('SET', key, string.format('%d', fence), 'PX', 86400000)
  return fence
end
-- acquire_fast.lua: the fast path (fairlock/fastpath.go): takes a free
-- mutex that nobody waits for, opening the caller's session first if its
-- call is the session's first, and draws the grant's fence. It stands
-- alone, with the keys it uses, as release_fast.lua does: on the commonest
-- call of an uncontended cycle, acquire.lua's keys, arguments and Lua cost
-- Redis and the client more than its commands do. The lock free with
-- waiters queued (its holder died or expired before a heartbeat granted
-- it) is taken all the same and its caller hands it to them (cancel.lua):
-- the fast path never jumps the queue.
-- KEYS[1] the mutex's holders key, KEYS[2] its fence key, KEYS[3] its order
-- set (lib/keys.lua), KEYS[4] the caller's session's holders' key, and
-- KEYS[5] the session's waiters' key when the call opens the session
-- ARGV[1] token, ARGV[2] the grant's record TTL in ms; to open the session,
-- ARGV[3] its holders' key TTL, ARGV[4] its waiters' key TTL and ARGV[5]
-- the record TTL its waiters' key holds, in ms
-- Reply: the grant's fence (> 0); 0 the lock is held; -1 the session is
-- gone (nothing changed); -2 the lock was free with waiters queued: token
-- holds it, and its caller hands it on.
if ARGV[3] then
  redis.call('HSETNX', KEYS[4], '', 1)
  redis.call('PEXPIRE', KEYS[4], ARGV[3])
  redis.call('SET', KEYS[5], ARGV[5], 'PX', ARGV[4])
elseif redis.call('EXISTS', KEYS[4]) == 0 then
  return -1
end
if not redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then return 0 end
if redis.call('EXISTS', KEYS[3]) == 1 then return -2 end
return drawFence(KEYS[2])
