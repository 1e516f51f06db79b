-- inspect.lua: a snapshot of one lock, read-only.
-- uses: clock
-- KEYS: lock, queue, alive, fence, order, meta (see lib/keys.lua)
-- ARGV: none
-- Reply: {holder token or "", lease left ms (or -2), last fence or 0, live
--         waiters, the holder's metadata or ""}
local holder = redis.call('GET', lockKey) or ''
local meta = ''
if holder ~= '' then meta = redis.call('HGET', metaKey, holder) or '' end
return {holder, redis.call('PTTL', lockKey), tonumber(redis.call('GET', fenceKey) or '0'),
  redis.call('ZCOUNT', aliveKey, '(' .. nowMs(), '+inf'), meta}
