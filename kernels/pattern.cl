// The bit-exact handoff pattern. Word i of the pattern for `seed` is
//     fmix32(i * 0x9E3779B1u + seed)
// (MurmurHash3's 32-bit finaliser over a Weyl sequence), all arithmetic mod 2^32. The Rust
// twin is crate::generate::pattern_word(seed, i); the two must agree bit for bit.
//
// OpenCL C 1.2. Every pointer is a plain __global pointer so that a buffer object and an SVM /
// raw device pointer both work as the argument. launch() rounds the global size up to the
// work-group size, so every kernel bounds-checks its id against `words`.

inline uint clhip_pattern_word(uint seed, uint i)
{
    uint x = i * 0x9E3779B1u + seed;
    x ^= x >> 16;
    x *= 0x85EBCA6Bu;
    x ^= x >> 13;
    x *= 0xC2B2AE35u;
    x ^= x >> 16;
    return x;
}

// p[i] = pattern(seed, i) for i < words.
__kernel void pattern_fill(__global uint* p, uint seed, uint words)
{
    size_t gid = get_global_id(0);
    if (gid >= (size_t)words)
        return;
    uint i = (uint)gid;
    p[i] = clhip_pattern_word(seed, i);
}

// Compares p[i] with pattern(seed, i) for i < words. result[0] counts mismatches (host sets it
// to 0), result[1] keeps the smallest mismatching index (host sets it to 0xFFFFFFFF, which then
// means "none"), and work-item 0 writes `words` into result[2] (host sets it to 0): a check
// whose kernel never ran must not read as "no mismatches".
void clhip_check_into(__global const uint* p, uint seed, uint words, __global uint* result)
{
    size_t gid = get_global_id(0);
    if (gid >= (size_t)words)
        return;
    uint i = (uint)gid;
    if (i == 0u)
        result[2] = words;
    if (p[i] != clhip_pattern_word(seed, i)) {
        atomic_inc(&result[0]);
        atomic_min(&result[1], i);
    }
}

__kernel void pattern_check(__global const uint* p, uint seed, uint words, __global uint* result)
{
    clhip_check_into(p, seed, words, result);
}

// pattern_check into slot `slot` of a buffer of 4-word slots. The reuse op checks 1,000
// crossings: one buffer made, written and read once costs three host waits where a buffer per
// crossing cost four thousand.
__kernel void pattern_check_slot(__global const uint* p, uint seed, uint words,
                                 __global uint* results, uint slot)
{
    clhip_check_into(p, seed, words, results + 4 * (size_t)slot);
}

// After pattern_check on the same queue: result[3] = the word found at the first mismatch, so
// the verdict can say what OpenCL saw there (a second pass, since only a finished check knows
// which index is first).
void clhip_observe_into(__global const uint* p, uint words, __global uint* result)
{
    if (get_global_id(0) == 0 && result[0] != 0u && result[1] < words)
        result[3] = p[result[1]];
}

__kernel void pattern_observe(__global const uint* p, uint words, __global uint* result)
{
    clhip_observe_into(p, words, result);
}

// pattern_observe of slot `slot` (as pattern_check_slot).
__kernel void pattern_observe_slot(__global const uint* p, uint words, __global uint* results,
                                   uint slot)
{
    clhip_observe_into(p, words, results + 4 * (size_t)slot);
}

// The device address of a buffer, as a kernel sees its argument (the cl-gpu-va path). OpenCL C gives
// no other way to learn it; what the peer can do with it is what the cl-gpu-va path tests.
__kernel void buffer_address(__global const uint* buf, __global ulong* out)
{
    if (get_global_id(0) == 0)
        out[0] = (ulong)buf;
}
