-- helpers named like hooks on purpose, said so; and a near name whose hook
-- is defined (a warning: the term has its step-down hook)
not_hooks = { "is_leader", "stepdown" }
function is_leader() return false end
function stepdown() end
function on_stepdown(ev) stepdown() end
function on_stepdwon(ev) end
