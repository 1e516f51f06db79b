-- extend.lua: set token's grant record to live a new TTL more, or with
-- grow only make it live at least that long.
-- uses: store keep
-- KEYS: see lib/keys.lua; ARGV[1..5] as there, then
-- ARGV[6] token, ARGV[7] TTL ms, ARGV[8] "1" if token has metadata, else
-- "", ARGV[9] "1" to grow only, else ""
-- Reply: 1 extended; 0 token holds nothing or its session died (nothing
-- changed but its metadata dropped: the token has left).
local token, ttl = ARGV[6], tonumber(ARGV[7])
if not renew(token, ttl, ARGV[9] == '1') then
  if ARGV[8] ~= '' then redis.call('HDEL', metaKey, token) end
  return 0
end
if ARGV[8] ~= '' then keepFor(metaKey, ttl, false) end
return 1
