-- keys.lua starts every script. Every script gets the same five keys of one
-- lock, which share one hash tag:
--   KEYS[1] lock   string: the holder's token, with the lease as its TTL
--   KEYS[2] queue  list: waiter tokens in arrival order (the holder is not in it)
--   KEYS[3] alive  sorted set: waiter token -> server-clock deadline in ms
--   KEYS[4] fence  string: the last fence handed out
--   KEYS[5] meta   hash: token -> the caller's metadata, for the waiters and
--                  the holder that gave one (absent when none did)
local lockKey, queueKey, aliveKey, fenceKey, metaKey = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5]
