-- vip.lua's shape with a typo: the address would stay up after the term
function on_leader(ev) end
function on_stepdwon(ev) end
