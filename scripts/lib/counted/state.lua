-- counted/state.lua: keepState for the counted store. The state counts
-- what the holders' key lists (permits in use, each group's, each
-- holder's fence), so the two are kept together, keepTTL ms at least, and
-- a record that expires is dropped from both at once (openStore). The
-- holders' key can still go first, when a Locker with a shorter keepTTL
-- made it anew: the next call of any script then finds permits counted
-- and no holders, and counts 0 (openStore); nothing reads the count
-- before that.

local function keepState(mayBeNew)
  keepFor(stateKey, keepTTL, mayBeNew)
  keepFor(holdersKey, keepTTL, false)
end
