-- seed.lua: draw a fence, seeding the counter from the server's clock if it
-- was not seeded yet. The fast path (fairlock/fastpath.go) runs it when its
-- INCR found the counter below the seed floor.
-- KEYS: see lib/keys.lua; ARGV[1..5] as there
-- Reply: the fence
return nextFence()
