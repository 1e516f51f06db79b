-- force_release.lua: end a holder's grant whoever holds it, or every
-- holder's, and grant the heads that now fit, as a release would. Each
-- ended holder's Locker finds its grant gone at its next heartbeat.
-- KEYS: see lib/keys.lua; ARGV[1..5] as there, then ARGV[6] the holder
-- token to end, or "" for every holder
-- Reply: {{ended token, ...}, {granted token, fence, ...}}; nothing ended
-- means nothing changed (no such holder).
admitAtFullMemory()
local freed = openStore(nil, 0, false)
local ended = {}
if ARGV[6] == '' then
  eachHolder(function(token) ended[#ended + 1] = token end)
elseif holds(ARGV[6]) then
  ended[1] = ARGV[6]
end
for _, token in ipairs(ended) do
  drop(token)
  redis.call('HDEL', metaKey, token)
end
local granted
if #ended > 0 or freed then
  granted = grantHeads()
  settle()
end
return {ended, granted or {}}
