-- cancel.lua: withdraw token, whether it still waits or was granted meanwhile.
-- Removing from the middle of the queue is the one O(N) step, paid only here.
-- uses: unlock
-- KEYS: lock, queue, alive, fence, order, meta[, state] (see lib/keys.lua)
-- ARGV[1] token, ARGV[2] notify command, ARGV[3] notify channel prefix,
-- ARGV[4] "1" if token has metadata to drop, else ""
-- Reply: 1 token held permits and released them; 0 otherwise.
local left = redis.call('LREM', queueKey, 1, ARGV[1]) == 1
redis.call('ZREM', aliveKey, ARGV[1])
redis.call('ZREM', orderKey, ARGV[1])
return releaseIfHolder(ARGV[1], ARGV[2], ARGV[3], ARGV[4], left)
