/*
 * json.h - zkelect.json: encode and decode JSON through cJSON
 * (docs/policy.md "The policy script").
 *
 * Both run in one piece in C (out of the instruction budget's reach, like
 * any C call; linear in the size of the value or the text). What cJSON
 * allocates is counted against the script's memory limit while it lives,
 * so a huge or deep document from another client fails with nil, msg
 * instead of taking memory the script was not given. Loop thread only.
 */
#ifndef ZKELECT_JSON_H
#define ZKELECT_JSON_H

struct lua_State;

/* The deepest nesting of arrays and objects either direction accepts. */
#define JSON_MAX_DEPTH 128

/* [-0, +0, m] Sets the field json (encode, decode, null) of the table on
 * top of the stack (the zkelect table, while sandbox_open builds it). */
void json_open_lua(struct lua_State *L);

#endif
