-- Test observer (tests/integration/test_watch.py): logs every leader change.
function on_leader_change(ev)
  zkelect.log("info", string.format("change leader=%s epoch=%s node=%s reason=%s",
    tostring(ev.leader), tostring(ev.leader_epoch), tostring(ev.leader_node), ev.reason))
end
