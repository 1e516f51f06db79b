-- recover.lua: what became of a request whose answer was lost, sent with
-- token: acquire.lua, or the fast path. If it reached Redis, answer as it
-- did: the fence if token holds permits (the caller takes the grant up with
-- this answer), or its place if it waits. If not, withdraw token for good,
-- so that the request changes nothing if it comes later: a network may
-- deliver it after this call. go-redis never sends such a request twice (a
-- retry could come before it); this script it may send again, since a
-- second run answers as the first did.
-- KEYS: see lib/keys.lua; ARGV[1..5] as there, then ARGV[6] token,
-- ARGV[7] "count" to count the place, or "fast" for the fast path's
-- request, ARGV[8] the caller's lease TTL in ms: how long the mark lives
-- if the session's keys are not there yet (the lost request may have been
-- the one to open them)
-- Reply: the fence (> 0) if token holds permits; if it waits, -place
-- under "count" (1 is next), else -1; 0 if it did neither and is
-- withdrawn now (counted in its session: lib/tokens.lua's countWrite).
-- Errors: ERR_SESSION_GONE if token holds or waits but its session is
-- gone (the fast path's SET runs whether the session lives or not): the
-- grant or place is void, and the caller starts another session.
-- ERR_WAITERS_FIRST if the fast path's token holds the lock while waiters
-- are queued, who may have come before it: the caller hands the lock to
-- them, as the fast path does (cancel.lua), and queues.
local token = ARGV[6]
if holds(token) then
  if not holderAlive(token) then return redis.error_reply('ERR_SESSION_GONE') end
  if ARGV[7] == 'fast' and waiting() > 0 then return redis.error_reply('ERR_WAITERS_FIRST') end
  clearMark(token)
  -- A fast path that found waiters queued took the lock without a fence
  -- (acquire_fast.lua): if it is still the holder, its grant gets one now.
  if ARGV[7] == 'fast' then return nextFence() end
  return fenceOf(token)
end
if waits(token) then
  if not grantTTL(token) then return redis.error_reply('ERR_SESSION_GONE') end
  if ARGV[7] == 'count' then return -placeOf(token) end
  return -1
end
withdraw(token, ARGV[8])
countWrite(token)
return 0
