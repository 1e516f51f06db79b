-- keys.lua starts every script. Every script gets the same four keys of one
-- lock, which share one hash tag:
--   KEYS[1] lock   string: the holder's token, with the lease as its TTL
--   KEYS[2] queue  list: waiter tokens in arrival order (the holder is not in it)
--   KEYS[3] alive  sorted set: waiter token -> server-clock deadline in ms
--   KEYS[4] fence  string: the last fence handed out
local lockKey, queueKey, aliveKey, fenceKey = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
