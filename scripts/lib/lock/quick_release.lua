-- lock/quick_release.lua: release.lua's first lines on the mutex, before
-- any module: the uncontended release (the caller holds the lock, gave no
-- metadata, and nobody waits) runs three commands and defines no
-- function: Lua makes every function of a script anew on each call, which
-- would double the Redis time of this, the commonest release. Anything
-- else goes on to the full release below.
if ARGV[7] == '' and redis.call('GET', holdersKey) == ARGV[6] and not redis.call('LINDEX', queueKey, 0) then
  redis.call('DEL', holdersKey)
  return 1
end
