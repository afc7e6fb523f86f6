function on_leader(ev)
  zkelect.log("info", "missing end"
