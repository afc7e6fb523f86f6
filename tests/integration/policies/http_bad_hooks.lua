-- Test policy (tests/integration/test_http.py): on_leader runs past its
-- slice (a timeout), health() raises (a failure): both must be counted.
function on_leader(ev)
  local x = 0
  while true do x = x + 1 end
end

function health()
  error("health check broke")
end
