-- extend.lua: make token's grant record live at least a TTL more, never
-- shorter (an extension that comes late must not cut a later one short);
-- and take up a grant made to a waiter of the caller's, renewing its
-- session.
-- KEYS: see lib/keys.lua; ARGV[1..5] as there, then
-- ARGV[6] token, ARGV[7] TTL ms, ARGV[8] "1" if token has metadata, else
-- "", ARGV[9] "" or, to take the grant up, its session's lease TTL in ms:
-- the session's holders' key is renewed with it and token's mark dropped,
-- so the grant lives by that key alone
-- Reply: 1 extended; 0 token holds nothing or its session died (nothing
-- changed but its metadata dropped: the token has left).
local token, ttl = ARGV[6], tonumber(ARGV[7])
if not renew(token, ttl) then
  if ARGV[8] ~= '' then redis.call('HDEL', metaKey, token) end
  return 0
end
if ARGV[8] ~= '' then keepFor(metaKey, ttl, false) end
if ARGV[9] ~= '' then
  redis.call('PEXPIRE', sessionKey(token), ARGV[9])
  clearMark(token)
end
return 1
