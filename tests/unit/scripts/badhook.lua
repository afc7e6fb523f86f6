on_leader = 42
