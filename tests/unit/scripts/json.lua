-- zkelect.json: the mapping, the refusals (nil, msg), the bounds
local J = zkelect.json
local null = J.null
assert(type(J.encode) == "function" and type(J.decode) == "function" and null ~= nil)

local function fails(want, ok, msg)
  assert(ok == nil, "expected a failure, got " .. tostring(ok))
  assert(type(msg) == "string" and msg:find(want, 1, true), "message: " .. tostring(msg) .. " (want " .. want .. ")")
end

-- encode: scalars, integers with all 64 bits, floats, null, arrays, objects
assert(J.encode(nil) == "null" and J.encode(null) == "null")
assert(J.encode(true) == "true" and J.encode(false) == "false")
assert(J.encode(0) == "0" and J.encode(-7) == "-7")
assert(J.encode(math.maxinteger) == "9223372036854775807", J.encode(math.maxinteger))
assert(J.encode(math.mininteger) == "-9223372036854775808")
assert(J.encode(1.5) == "1.5" and tonumber(J.encode(0.1)) == 0.1)
assert(J.encode("a\"b\\c\n\1") == '"a\\"b\\\\c\\n\\u0001"', J.encode("a\"b\\c\n\1"))
assert(J.encode("héllo €") == '"héllo €"')
assert(J.encode({ 1, 2, "x", true, null }) == '[1,2,"x",true,null]')
assert(J.encode({}) == "{}")
assert(J.encode({ k = { 1 } }) == '{"k":[1]}')
local shared = { 1 }
assert(J.encode({ shared, shared }) == "[[1],[1]]")  -- the same table twice is no cycle

-- decode: types, null, integers, floats
local v = J.decode(' {"a": [1, null, 3.5, "x", true, false], "b": {"c": -12}, "big": 9007199254740993} ')
assert(v.a[1] == 1 and math.type(v.a[1]) == "integer" and v.a[2] == null and #v.a == 6)
assert(v.a[3] == 3.5 and v.a[4] == "x" and v.a[5] == true and v.a[6] == false)
assert(v.b.c == -12 and math.type(v.b.c) == "integer")
assert(math.type(v.big) == "float")                         -- beyond 2^53: a float
assert(math.type(J.decode("9007199254740991")) == "integer")
assert(math.type(J.decode("-9007199254740991")) == "integer")
assert(J.decode('"\\u00e9\\ud83d\\ude00"') == "é😀")
assert(J.decode("[]") ~= nil and next(J.decode("[]")) == nil)
assert(J.decode("null") == null)
assert(J.decode('{"k":1,"k":2}').k == 2)

-- round trip of what zkelect publishes in a node
local node = { id = "db-1", data = "10.0.0.1:5432", epoch = 4294967299, v = 1 }
local back = J.decode(J.encode(node))
for k, x in pairs(node) do assert(back[k] == x, k) end

-- encode refusals: nil, msg naming what and where
local cyc = { a = { b = {} } }
cyc.a.b.c = cyc
fails("a table that contains itself (a cycle) at $.a.b.c", J.encode(cyc))
fails("a function (not encodable) at $.f", J.encode({ f = print }))
fails("neither an array", J.encode({ 1, 2, [4] = 4 }))
fails("neither an array", J.encode({ [true] = 1 }))
fails("neither an array", J.encode({ 1, x = 2 }))
fails("a NaN or infinite number at $[1]", J.encode({ 0 / 0 }))
fails("a NaN or infinite number at $.x", J.encode({ x = math.huge }))
fails("a string that is not valid UTF-8 at $[1][1]", J.encode({ { "\255" } }))
fails("a key with a NUL byte", J.encode({ ["k\0"] = 1 }))
fails("not valid UTF-8", J.encode("\xed\xa0\x80"))                -- a surrogate
fails("a thread (not encodable)", J.encode(coroutine.create(print)))
local deep = {}
for _ = 1, 200 do deep = { deep } end
fails("nesting deeper than 128", J.encode(deep))
local ok128 = {}
for _ = 1, 127 do ok128 = { ok128 } end
assert(J.encode(ok128))

-- decode refusals
fails("not valid JSON at byte 0 (empty text)", J.decode(""))
fails("not valid JSON", J.decode("{"))
fails("not valid JSON at byte 3", J.decode("[1,]"))
fails("text after the value at byte 4", J.decode("[1] x"))
fails("not valid UTF-8 at byte 1", J.decode('"\255"'))
fails("nesting deeper than 128", J.decode(("["):rep(200) .. ("]"):rep(200)))
fails("not valid JSON", J.decode(("["):rep(100000)))              -- cJSON's own nesting limit
assert(not pcall(J.decode, {}), "a table is not text: raises")

-- a document larger than the memory the script has left: nil, msg, and the
-- state goes on (cJSON's blocks were charged and given back)
local huge = "[" .. ("0,"):rep(500000) .. "0]"
fails("out of memory", J.decode(huge))
huge = nil
collectgarbage()
fails("out of memory", J.encode((function() local t = {} for i = 1, 200000 do t[i] = i end return t end)()))
collectgarbage()
assert(J.decode(J.encode({ after = true })).after == true)
json_ok = true
