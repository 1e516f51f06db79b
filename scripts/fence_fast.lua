-- fence_fast.lua: the fence of the fast path's grant (fairlock/fastpath.go),
-- drawn in its pipeline after its SET NX, and only if that took the lock:
-- a call that found the lock taken draws none. It stands alone, with the
-- two keys it uses, as release_fast.lua does.
-- KEYS[1] the mutex's holders key, KEYS[2] its fence key
-- ARGV[1] token
-- Reply: the fence of token's grant; 0 if token does not hold the lock
-- (nothing changed).
if redis.call('GET', KEYS[1]) ~= ARGV[1] then return 0 end
return drawFence(KEYS[2])
