-- keep.lua: TTLs that only grow.

-- keepFor makes key live at least ttl ms more, never shortening it (other
-- Lockers may use a longer TTL). One command when the key already has a
-- TTL, the common case; GT leaves a key without one alone, so NX gives a
-- new key its first.
local function keepFor(key, ttl)
  if redis.call('PEXPIRE', key, ttl, 'GT') == 0 then redis.call('PEXPIRE', key, ttl, 'NX') end
end
