-- A finalizer that never returns: closing the state must still end.
local t = setmetatable({}, { __gc = function() while true do end end })
keep = t
