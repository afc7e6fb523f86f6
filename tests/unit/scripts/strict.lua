-- "strict globals": reading an undefined global raises. The agent's hook
-- lookup must not trip over it (on_follower etc. are not defined here).
function on_leader(ev) zkelect.log("info", "strict leader " .. ev.id) end
setmetatable(_G, {
  __index = function(_, k) error("undefined global " .. tostring(k), 2) end,
})
