-- heartbeat.lua: one call per Locker, lock and heartbeat, for its waiters
-- there. The Locker's session keeps them alive (lib/tokens.lua); this call
-- tells each its state, which finds grants whose message was lost, and
-- keeps the lock moving: it grants what expired or dead holders left and
-- drops dead waiters (lib/maintain.lua).
-- KEYS: see lib/keys.lua; ARGV[1..5] as there, then
-- ARGV[6] the capacity ("" for a mutex), ARGV[7] the group limit,
-- ARGV[8] "1" to count the waiters' places, ARGV[9] "1" to make the
-- lock's keys live keepTTL ms more, ARGV[10..] waiter tokens, at most BATCH
-- Reply: {s1, s2, ...}: si is, for waiter token i, the fence if it was
-- granted, 0 if it is neither granted nor queued (it lost its place), and
-- while it waits -place (1 is next) when asked, else -1.
admitAtFullMemory()
openStore(tonumber(ARGV[6]), tonumber(ARGV[7]), false)
maintain(true)
grantHeads()
local tokens = {unpack(ARGV, 10)}
local reply = {}
if #tokens == 0 then return reply end
local queued = redis.call('ZMSCORE', orderKey, unpack(tokens))
local positions = ARGV[8] == '1'
local waits = false
for i, token in ipairs(tokens) do
  local status = 0
  if queued[i] then
    waits, status = true, -1
    if positions then status = -placeOf(token) end
  elseif holds(token) then
    status = fenceOf(token)
  end
  reply[i] = status
end
-- A heartbeat sent before its waiters were granted and left may reach an
-- idle lock: the scan's schedule it wrote must not outlive them. While one
-- of them waits, the lock is not idle, and no command is spent to ask.
if not waits then settle(true) end
if ARGV[9] == '1' then
  keepQueue()
  keepFor(metaKey, keepTTL, false)
  keepState(false)
  for i, token in ipairs(tokens) do
    if queued[i] then keepLine(token) end
  end
end
return reply
