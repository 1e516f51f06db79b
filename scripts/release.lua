-- release.lua: free the permits held by token and grant the heads that fit.
-- KEYS: see lib/keys.lua; ARGV[1..5] as there, then
-- ARGV[6] token, ARGV[7] "1" if token has metadata to drop, else "",
-- ARGV[8] "1" if its grant may still be marked as not taken up, else ""
-- Reply: 1 released; 0 token held nothing (nothing changed but its
-- metadata and mark dropped).
local freed = openStore(nil, 0, false)
return releaseIfHolder(ARGV[6], ARGV[7], ARGV[8], freed, false)
