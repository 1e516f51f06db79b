-- release.lua: free the permits held by token and grant the heads that fit.
-- A release counts itself in token's session (lib/tokens.lua's
-- countWrite), so that its loss in a rollback is found.
-- KEYS: see lib/keys.lua; ARGV[1..5] as there, then
-- ARGV[6] token, ARGV[7] "1" if token has metadata to drop, else "",
-- ARGV[8] "1" if its grant may still be marked as not taken up, else ""
-- Reply: 1 released; 0 token held nothing (nothing changed but its
-- metadata and mark dropped).
local freed = openStore(nil, 0, false)
local held = releaseIfHolder(ARGV[6], ARGV[7], ARGV[8], freed, false)
if held == 1 then countWrite(ARGV[6]) end
return held
