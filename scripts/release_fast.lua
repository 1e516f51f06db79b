-- release_fast.lua: the mutex's uncontended release: the caller holds the
-- lock, gave no metadata, took its grant up, and nobody waits, in any
-- lane. It stands alone, with the two keys it reads and the token, where
-- release.lua takes six keys and eight arguments: on the commonest call of
-- an uncontended cycle, their transfer and Lua strings cost Redis and the
-- client more than its three commands do. Its one write, DEL, cannot grow
-- memory, so Redis runs it at full memory.
-- KEYS[1] the mutex's holders key, KEYS[2] its order set (lib/keys.lua)
-- ARGV[1] token
-- Reply: 1 released; 0 token does not hold the lock; -1 waiters are
-- queued, and release.lua must hand the lock on. Only 1 changed anything.
if redis.call('EXISTS', KEYS[2]) == 1 then return -1 end
if redis.call('GET', KEYS[1]) ~= ARGV[1] then return 0 end
redis.call('DEL', KEYS[1])
return 1
