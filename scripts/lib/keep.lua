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
