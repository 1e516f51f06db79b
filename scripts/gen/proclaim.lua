-- proclaim.lua: an election's leader publishes its value
-- (fairlock/election.go). Only the holder of the election's lock may: the
-- leader record is written under its epoch (its grant's fence) and
-- revision, and appended to the log, which observers read in order,
-- without pub/sub. A revision is written once: a call that comes again
-- (a lost reply), or after a later one, changes nothing.
-- KEYS[1] the election's lock key (its holder's token), KEYS[2] the
-- leader record (a hash), KEYS[3] the log (a stream)
-- ARGV[1] the leader's token, ARGV[2] its epoch, ARGV[3] the revision
-- (1 for the value Campaign publishes), ARGV[4] the value, ARGV[5] how
-- long the record and the log live after this call, ms
-- Reply: 1 if the token holds the lock, else 0 (nothing written).
if redis.call('GET', KEYS[1]) ~= ARGV[1] then return 0 end
local f = redis.call('HMGET', KEYS[2], 'epoch', 'rev')
if f[1] == ARGV[2] and tonumber(f[2]) >= tonumber(ARGV[3]) then return 1 end
redis.call('HSET', KEYS[2], 'epoch', ARGV[2], 'rev', ARGV[3], 'token', ARGV[1], 'value', ARGV[4])
redis.call('PEXPIRE', KEYS[2], ARGV[5])
redis.call('XADD', KEYS[3], 'MAXLEN', '~', 1000, '*', 'epoch', ARGV[2], 'rev', ARGV[3], 'value', ARGV[4])
redis.call('PEXPIRE', KEYS[3], ARGV[5])
return 1
