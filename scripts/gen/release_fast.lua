-- release_fast.lua: the mutex's uncontended release: the caller holds the
-- lock, gave no metadata, took its grant up, and nobody waits, in any
-- lane. It stands alone, with the three keys it uses and the token, where
-- release.lua takes six keys and eight arguments: on the commonest call of
-- an uncontended cycle, their transfer and Lua strings cost Redis and the
-- client more than its commands do. Its first write, DEL, cannot grow
-- memory, so Redis runs it at full memory. A release counts itself in the
-- caller's session, as release.lua does (lib/tokens.lua's countWrite).
-- KEYS[1] the mutex's holders key, KEYS[2] its order set (lib/keys.lua),
-- KEYS[3] the caller's session's holders' key
-- ARGV[1] token
-- Reply: 1 released; 0 token does not hold the lock; -1 waiters are
-- queued, and release.lua must hand the lock on. Only 1 changed anything.
if redis.call('EXISTS', KEYS[2]) == 1 then return -1 end
if redis.call('GET', KEYS[1]) ~= ARGV[1] then return 0 end
redis.call('DEL', KEYS[1])
if redis.call('HINCRBY', KEYS[3], '', 1) == 1 then redis.call('HDEL', KEYS[3], '') end
return 1
