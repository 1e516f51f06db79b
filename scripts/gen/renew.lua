-- renew.lua: one session's renewal (lib/tokens.lua), one call per session
-- and heartbeat: its keys live their TTLs more, the renewal is counted in
-- its field "", and the grants its Locker took up lose their marks "u".
-- Its first write, PEXPIRE, cannot grow memory, so Redis runs it at full
-- memory.
-- KEYS[1] the session's holders' key, KEYS[2] its waiters' key
-- ARGV[1] the lease TTL, ms; ARGV[2] the waiter TTL, ms, or "" to leave
-- the waiters' key alone (its Locker found it gone); ARGV[3..] tokens of
-- grants the Locker took up: their marks go if the waiters' key was
-- renewed (without it those grants died, and a mark dropped now would
-- bring them back)
-- Reply: {count, waiting}: the session's count of calls, this one
-- included, or 0 if the session is gone (nothing changed); waiting is 1
-- if the waiters' key was renewed.
if redis.call('HEXISTS', KEYS[1], '') == 0 then return {0, 0} end
redis.call('PEXPIRE', KEYS[1], ARGV[1])
local count = redis.call('HINCRBY', KEYS[1], '', 1)
local waiting = 0
if ARGV[2] ~= '' then waiting = redis.call('PEXPIRE', KEYS[2], ARGV[2]) end
if waiting == 1 and #ARGV > 2 then redis.call('HDEL', KEYS[1], unpack(ARGV, 3)) end
return {count, waiting}
