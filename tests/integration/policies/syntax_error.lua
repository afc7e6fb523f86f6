-- Test policy (tests/integration/test_bad_input.py): a syntax error on line 4.

function on_leader(ev)
  local x = = 1
end
