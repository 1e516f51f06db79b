-- release.lua: free the lock held by token and hand it to the next waiter.
-- uses: unlock
-- KEYS: lock, queue, alive, fence, order (see lib/keys.lua)
-- ARGV[1] token, ARGV[2] notify command, ARGV[3] notify channel prefix
-- Reply: 1 released; 0 token did not hold the lock (nothing changed).
return releaseIfHolder(ARGV[1], ARGV[2], ARGV[3])
