-- cancel.lua: withdraw token, whether it still waits or was granted
-- meanwhile. Removing from the middle of a queue is the one O(N) step,
-- paid only here. A withdrawal counts itself in token's session
-- (lib/tokens.lua's countWrite), so that its loss in a rollback is found.
-- KEYS: see lib/keys.lua; ARGV[1..5] as there, then
-- ARGV[6] token, ARGV[7] "1" if token has metadata to drop, else "",
-- ARGV[8] "" or, to withdraw it for good (a request that brought it may
-- still be on its way, and must find it withdrawn: lib/tokens.lua), the
-- caller's lease TTL in ms
-- Reply: 1 token held permits and released them; 0 otherwise.
admitAtFullMemory()
local token = ARGV[6]
local freed = openStore(nil, 0, false)
local left = leave(token)
local held = releaseIfHolder(token, ARGV[7], '', freed, left)
if ARGV[8] == '' then clearMark(token) else withdraw(token, ARGV[8]) end
countWrite(token)
return held
