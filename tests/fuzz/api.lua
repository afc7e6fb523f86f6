-- The fixed policy of fuzz_lua_api: no fuzzed code runs, only fuzzed
-- arguments. fuzz_call (set by the target) makes one zkelect.* call.
function noop() end
function boom() error("boom") end
function on_leader(ev) fuzz_call() end
function on_follower(ev) fuzz_call() end
