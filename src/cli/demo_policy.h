/*
 * demo_policy.h - the policy script zkelect demo gives its candidates:
 * examples/policy.lua, compiled into the binary (CMake writes
 * demo_policy.c in the build tree from it), so that an installed zkelect
 * needs no other file to show itself.
 */
#ifndef ZKELECT_DEMO_POLICY_H
#define ZKELECT_DEMO_POLICY_H

/* The script's text, NUL-terminated. */
extern const char demo_policy_lua[];

#endif
