-- recover.lua: what became of a request whose answer was lost, sent with
-- token: acquire.lua, or the fast path. If it reached Redis, answer as it
-- did: the fence if token holds permits (the caller takes the grant up with
-- this answer), or its place if it waits. If it did not, withdraw token
-- for good, so that the request changes nothing if it comes later: a
-- network may deliver it after this call. go-redis never sends such a
-- request twice (a retry could come before it); this script it may send
-- again, since a second run answers as the first did.
-- uses: store fifo tokens
-- KEYS: see lib/keys.lua; ARGV[1..5] as there, then ARGV[6] token,
-- ARGV[7] "count" to count the place, ARGV[8] the caller's lease TTL in
-- ms: how long the mark lives if the session's keys are not there yet
-- (the lost request may have been the one to open them)
-- Reply: the fence (> 0) if token holds permits; if it waits, -place
-- under "count" (1 is next), else -1; 0 if it did neither and is
-- withdrawn now.
local token = ARGV[6]
if holds(token) then
  clearMark(token)
  return fenceOf(token)
end
if waits(token) then
  if ARGV[7] == 'count' then return -placeOf(token) end
  return -1
end
withdraw(token, ARGV[8])
return 0
