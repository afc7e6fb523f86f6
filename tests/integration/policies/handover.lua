-- integration.handover: zkelect.candidates() and zkelect.resign{to = ID}.
-- Candidate "a" leads first; once b, c and the test's go-ahead node "go"
-- are in line (read with zkelect.candidates(), which waits for a reading on
-- the agent's session), it asks for two hand-overs: to an unknown id, which
-- must be refused with leadership kept, then to c (not next in line: b
-- steps aside for it), which ends its term.
local asked = false

local function ids(list)
  local t = {}
  for _, c in ipairs(list) do t[#t + 1] = c.id or "?" end
  return table.concat(t, ",")
end

function on_follower(ev)
  local list, age = zkelect.candidates()
  zkelect.log("info", "candidates " .. (list and ids(list) or ("failed " .. tostring(age))))
end

function on_leader(ev)
  if zkelect.id ~= "a" or asked then
    return
  end
  asked = true
  local list
  for _ = 1, 400 do
    list = zkelect.candidates()
    if list and #list >= 4 then break end
    zkelect.sleep(0.05)
  end
  zkelect.log("info", "candidates " .. (list and ids(list) or "none"))
  local ok, msg, code = zkelect.resign{ to = "nobody" }
  zkelect.log("info", string.format("resign to nobody: %s %s", tostring(ok), tostring(code)))
  zkelect.log("info", "resign to c")
  ok, msg, code = zkelect.resign{ to = "c" }
  -- not reached when it worked: the term ended, and its hook with it
  zkelect.log("info", string.format("resign to c returned: %s %s %s", tostring(ok),
                                    tostring(msg), tostring(code)))
end

-- c, once it leads and the go-ahead node is gone (c, b, a in line), hands
-- over to b from health(), which is no hook of the term: the call returns
-- with the successor.
local c_asked = false
function health()
  if zkelect.id == "c" and not c_asked and zkelect.status().role == "leader" then
    local list = zkelect.candidates()
    if list and ids(list) == "c,b,a" then
      c_asked = true
      local ok, who, code = zkelect.resign{ to = "b" }
      zkelect.log("info", string.format("health resign to b: %s %s %s", tostring(ok),
                                        tostring(who), tostring(code)))
    end
  end
  return true
end
