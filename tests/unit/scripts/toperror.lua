local x = nil
x.field = 1
