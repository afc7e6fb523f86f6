/* rng.h - xorshift64*: cheap per-object randomness for guids and jitter.
 * Not for secrets. The state must never be 0. */
#ifndef ZKELECT_RNG_H
#define ZKELECT_RNG_H
#include <stdint.h>

static inline uint64_t rng_next(uint64_t *state)
{
    uint64_t x = *state;
    x ^= x >> 12;
    x ^= x << 25;
    x ^= x >> 27;
    *state = x;
    return x * UINT64_C(2685821657736338717);
}

/* Uniform in [0, 1). */
static inline double rng_unit(uint64_t *state)
{
    return (double)(rng_next(state) >> 11) / 9007199254740992.0;
}
#endif
