-- unlock.lua: free what a holder holds and pass it on.

-- releaseIfHolder frees token's permits if it holds any and grants the
-- heads that now fit; it does so too when openStore freed the permits of
-- expired holders, or when token left the queue (a head that did not fit
-- may have been the one leaving). It drops token's metadata if hasMeta is
-- not "" (the caller gave some), and its mark (lib/tokens.lua) if marked
-- is not "": a token without either costs no command for them. Returns 1
-- if token held permits, 0 otherwise.
local function releaseIfHolder(token, hasMeta, marked, freed, left)
  if hasMeta ~= '' then redis.call('HDEL', metaKey, token) end
  if marked ~= '' then clearMark(token) end
  local held = drop(token)
  if held or freed or left then
    grantHeads()
    settle()
  end
  if held then return 1 end
  return 0
end
