-- keep.lua: TTLs that only grow.

-- keepFor makes key live at least ttl ms more, never shortening it (other
-- Lockers may use a longer TTL): one PEXPIRE GT. GT leaves a key without a
-- TTL alone, so where the key may be new (created by this call), mayBeNew
-- adds a PEXPIRE NX when GT did nothing.
local function keepFor(key, ttl, mayBeNew)
  if redis.call('PEXPIRE', key, ttl, 'GT') == 0 and mayBeNew then
    redis.call('PEXPIRE', key, ttl, 'NX')
  end
end

-- keepMade gives key, which this call made (so it has no TTL), ttl ms: one
-- PEXPIRE, where keepFor with mayBeNew spends two on a new key.
local function keepMade(key, ttl) redis.call('PEXPIRE', key, ttl) end

-- admitAtFullMemory: a Redis at full memory (maxmemory under noeviction)
-- refuses a script's first write if it may grow memory, and lets a script
-- that has written go on to its end. The scripts that serve the parties
-- already in (heartbeat, release, cancel, extend, force_release) make,
-- before a first write that may grow memory, one that cannot and changes
-- nothing (no field of metaKey is named ""), so nothing replicates: at
-- full memory, renewals, releases, withdrawals and grants to queued
-- waiters go on, while a new request (acquire.lua) is refused with Redis's
-- error. Where a script's first write never grows memory (the mutex's
-- release and extend start with a DEL, HDEL or PEXPIRE), it needs none.
local function admitAtFullMemory() redis.call('HDEL', metaKey, '') end
