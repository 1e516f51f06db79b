-- lock/quick_release.lua: release.lua's first lines on the mutex, before
-- any module: the uncontended release (the caller holds the lock, gave no
-- metadata, took its grant up, and nobody waits, in any lane) runs three
-- commands and defines no function: Lua makes every function of a script
-- anew on each call, which would double the Redis time of this, the
-- commonest release.
-- Anything else goes on to the full release below. Its one write, DEL,
-- cannot grow memory, so Redis runs it at full memory. EXISTS comes first:
-- with waiters queued, the full release reads the holder itself.
if ARGV[7] == '' and ARGV[8] == '' and redis.call('EXISTS', orderKey) == 0 and redis.call('GET', holdersKey) == ARGV[6] then
  redis.call('DEL', holdersKey)
  return 1
end
