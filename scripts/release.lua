-- release.lua: free the lock held by token and hand it to the next waiter.
-- uses: unlock
-- KEYS: lock, queue, alive, fence, order, meta (see lib/keys.lua)
-- ARGV[1] token, ARGV[2] notify command, ARGV[3] notify channel prefix,
-- ARGV[4] "1" if token has metadata to drop, else ""
-- Reply: 1 released; 0 token did not hold the lock (nothing changed but its
-- metadata dropped).
return releaseIfHolder(ARGV[1], ARGV[2], ARGV[3], ARGV[4])
