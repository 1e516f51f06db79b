-- lock/state.lua: keepState for the mutex, whose state holds only the
-- scan's schedule; its holder's key is the holder's record, whose TTL is
-- the record's own.

local function keepState(mayBeNew) keepFor(stateKey, keepTTL, mayBeNew) end
