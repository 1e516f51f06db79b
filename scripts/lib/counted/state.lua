-- counted/state.lua: keepState for the counted store. The state counts
-- what the holders' key lists (permits in use, each group's, each
-- holder's fence), so the two are kept together, keepTTL ms at least:
-- neither may outlive the other (a holders' key made anew starts with the
-- state's TTL, counted/store.lua's take), and a record that expires is
-- dropped from both at once (openStore).

local function keepState(mayBeNew)
  keepFor(stateKey, keepTTL, mayBeNew)
  keepFor(holdersKey, keepTTL, false)
end
