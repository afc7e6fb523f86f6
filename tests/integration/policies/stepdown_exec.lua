-- Test policy (tests/integration/test_hardening.py): on_stepdown runs a
-- 20 ms process, which fits on_stepdown's share of the step-down budget
-- for the granted session timeout, not for a smaller requested one.
function on_stepdown(ev)
  local ok, code = zkelect.exec({ "sleep", "0.02" })
  zkelect.log("info", "stepdown_exec ok=" .. tostring(ok) .. " code=" .. tostring(code))
end
