-- cancel.lua: withdraw token, whether it still waits or was granted
-- meanwhile. Removing from the middle of a queue is the one O(N) step,
-- paid only here.
-- uses: unlock
-- KEYS: see lib/keys.lua; ARGV[1..5] as there, then
-- ARGV[6] token, ARGV[7] "1" if token has metadata to drop, else ""
-- Reply: 1 token held permits and released them; 0 otherwise.
local freed = openStore(nil, 0, false)
local left = leave(ARGV[6])
return releaseIfHolder(ARGV[6], ARGV[7], freed, left)
