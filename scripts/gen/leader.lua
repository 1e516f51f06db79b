-- leader.lua: an election's leader, for anyone (fairlock/election.go):
-- the record its lock's holder wrote, if the holder wrote one, and where
-- the log stands, from which an observer reads on. Reads only.
-- KEYS[1] the election's lock key, KEYS[2] the leader record, KEYS[3] the
-- log
-- Reply: {epoch, revision, value, the log's last entry ID}; the first
-- three are "" when nobody leads (the lock is free, or its holder has not
-- written its record yet), the last "0-0" when the log is empty.
local last = redis.call('XREVRANGE', KEYS[3], '+', '-', 'COUNT', 1)[1]
local at = last and last[1] or '0-0'
local holder = redis.call('GET', KEYS[1])
local f = redis.call('HMGET', KEYS[2], 'token', 'epoch', 'rev', 'value')
if not holder or f[1] ~= holder then return {'', '', '', at} end
return {f[2], f[3], f[4], at}
