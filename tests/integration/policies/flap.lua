-- Test policy (tests/integration/test_hardening.py): a promotion that
-- always fails, so every term is resigned at once.
function on_leader(ev)
  error("cannot promote: epoch " .. tostring(ev.epoch))
end
