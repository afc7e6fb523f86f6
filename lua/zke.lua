--[[ zke: helpers shared by zkelect policies.

    local zke = require("zke")

Everything here is built on the zkelect API (zkelect.exec, zkelect.spawn,
zkelect.after) and follows its rules: functions that wait (run, try) can only
be called from a hook; what a leader hook starts belongs to the term.
]]
local zke = {}

local function spec_of(cmd, opts)
  local spec = {}
  if type(cmd) == "string" then
    spec[1] = cmd
    spec.shell = true
  elseif type(cmd) == "table" then
    for i = 1, #cmd do spec[i] = cmd[i] end
  else
    error("command must be an argv table or a shell string, got " .. type(cmd), 3)
  end
  for k, v in pairs(opts or {}) do spec[k] = v end
  return spec
end

local function describe(cmd)
  return type(cmd) == "table" and table.concat(cmd, " ") or tostring(cmd)
end

--- zke.try(cmd [, opts]) -> ok, stdout_or_message
-- Runs a command (argv table, or a string run by /bin/sh) and waits for it.
-- opts are zkelect.exec options (timeout, env, max_output). On failure the
-- message names the command, its exit code or signal, and its stderr.
function zke.try(cmd, opts)
  local ok, code, out, err = zkelect.exec(spec_of(cmd, opts))
  if ok then return true, out end
  if ok == nil then return false, code end          -- could not start: code is the message
  local why = type(code) == "number" and ("exit code " .. code) or tostring(code)
  local tail = (err or ""):gsub("%s+$", "")
  return false, string.format("%s: %s%s", describe(cmd), why, tail ~= "" and (": " .. tail) or "")
end

--- zke.run(cmd [, opts]) -> stdout
-- Like zke.try, but raises (so the hook fails, and a failed on_leader
-- resigns) when the command fails.
function zke.run(cmd, opts)
  local ok, res = zke.try(cmd, opts)
  if not ok then error(res, 2) end
  return res
end

--- zke.debounce(seconds, fn) -> function(...)
-- Returns a function that calls fn (with the arguments of the last call)
-- once no call has come for `seconds`. The timer belongs to the scope of
-- the last call (a term, inside leader hooks).
function zke.debounce(seconds, fn)
  assert(type(seconds) == "number" and seconds >= 0, "debounce: seconds must be a number >= 0")
  assert(type(fn) == "function", "debounce: fn must be a function")
  local timer, args
  return function(...)
    args = table.pack(...)
    if timer then timer:stop() end
    timer = zkelect.after(seconds, function()
      timer = nil
      fn(table.unpack(args, 1, args.n))
    end)
  end
end

--- zke.singleton(argv [, opts]) -> process handle
-- A leader-only job: call it from on_leader. The command runs for as long as
-- the term lasts (SIGTERM to its group when the term ends, SIGKILL after the
-- grace), restarted when it fails (opts.restart: "on-failure" by default, or
-- "always"; opts.restart_delay seconds, doubling up to 30). It gets
-- ZKELECT_EPOCH and ZKELECT_ID to fence what it writes. opts.on_exit(code,
-- signal) is called at each exit.
function zke.singleton(argv, opts)
  assert(type(argv) == "table" and #argv >= 1, "singleton: argv must be a non-empty table")
  opts = opts or {}
  local spec = {}
  for i = 1, #argv do spec[i] = argv[i] end
  spec.restart = opts.restart or "on-failure"
  spec.restart_delay = opts.restart_delay or 1
  spec.on_exit = opts.on_exit
  local p, err = zkelect.spawn(spec)
  if not p then error("singleton " .. describe(argv) .. ": " .. tostring(err), 2) end
  return p
end

return zke
