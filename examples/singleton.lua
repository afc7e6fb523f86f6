-- examples/singleton.lua: a leader-only singleton job.
--
-- The leader runs one copy of a job (here a shell loop that stamps a file
-- with its id and epoch every second) for as long as its term lasts. When
-- the term ends the agent stops the job (SIGTERM to its process group,
-- SIGKILL after the grace) before on_stepdown runs and before the node is
-- released, so in a graceful hand-over two copies never run at once. The job
-- is restarted if it fails. It gets ZKELECT_EPOCH: a real job passes it to
-- whatever it writes, so a stale leader's writes can be refused.
--
--   JOB_FILE=/tmp/job zkelect run --zk ... --path ... --id a --script examples/singleton.lua
local zke = require("zke")

local job_file = os.getenv("JOB_FILE") or "/tmp/zkelect-singleton-job"

function on_leader(ev)
  zkelect.log("info", "leading (epoch " .. ev.epoch .. "): starting the singleton job")
  zke.singleton({ "sh", "-c",
    'while :; do echo "$ZKELECT_ID $ZKELECT_EPOCH" > "$0.tmp" && mv "$0.tmp" "$0"; sleep 1; done',
    job_file }, { restart_delay = 1 })
end

function on_stepdown(ev)
  zkelect.log("info", "term over (" .. ev.reason .. "): the job has been stopped")
end
