-- release.lua: free the permits held by token and grant the heads that fit.
-- uses: unlock
-- KEYS: lock, queue, alive, fence, order, meta[, state] (see lib/keys.lua)
-- ARGV[1] token, ARGV[2] notify command, ARGV[3] notify channel prefix,
-- ARGV[4] "1" if token has metadata to drop, else ""
-- Reply: 1 released; 0 token held nothing (nothing changed but its
-- metadata dropped).
return releaseIfHolder(ARGV[1], ARGV[2], ARGV[3], ARGV[4])
