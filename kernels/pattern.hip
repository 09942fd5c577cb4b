// The bit-exact handoff pattern, for NVRTC and hiprtc (prelude.hip is prepended). Word i of the
// pattern for `seed` is fmix32(i * 0x9E3779B1u + seed), all arithmetic mod 2^32: the twin of
// crate::generate::pattern_word and kernels/pattern.cl. Do not change one without the others.

__device__ inline clhip_u32 clhip_pattern_word(clhip_u32 seed, clhip_u32 i)
{
    clhip_u32 x = i * 0x9E3779B1u + seed;
    x ^= x >> 16;
    x *= 0x85EBCA6Bu;
    x ^= x >> 13;
    x *= 0xC2B2AE35u;
    x ^= x >> 16;
    return x;
}

// p[i] = pattern(seed, i) for i < words. Word indices are taken mod 2^32, as in pattern.cl.
CLHIP_KERNEL void clhip_pattern_fill(clhip_u32* p, clhip_u32 seed, clhip_u64 words)
{
    clhip_u64 i = clhip_gid();
    if (i >= words)
        return;
    p[i] = clhip_pattern_word(seed, (clhip_u32)i);
}

// Compares p[i] with pattern(seed, i) for i < words. result[0] counts mismatches (the host sets
// it to 0), result[1] keeps the smallest mismatching index (the host sets it to ~0, which then
// means "none"), and thread 0 writes `words` into result[2] (the host sets it to 0): a check
// whose kernel never ran must not read as "no mismatches". The host reads the word at
// result[1] itself, so no second pass is needed.
CLHIP_KERNEL void clhip_pattern_check(const clhip_u32* p, clhip_u32 seed, clhip_u64 words,
                                      clhip_u64* result)
{
    clhip_u64 i = clhip_gid();
    if (i >= words)
        return;
    if (i == 0)
        result[2] = words;
    if (p[i] != clhip_pattern_word(seed, (clhip_u32)i)) {
        atomicAdd(&result[0], 1ull);
        atomicMin(&result[1], i);
    }
}

// Busy work of `iters` steps per thread: the wrong-semaphore plant holds the peer's work back
// with it, so that an OpenCL that does not really wait reads before the peer has written, every
// time. The store keeps the loop.
CLHIP_KERNEL void clhip_spin(clhip_u32* sink, clhip_u32 iters)
{
    clhip_u32 x = (clhip_u32)clhip_gid() + 1u;
    for (clhip_u32 i = 0; i < iters; i++)
        x = x * 1664525u + 1013904223u;
    if (x == 0u)
        sink[0] = x;
}

// p[word] ^= mask, one thread: tests plant an error with it.
CLHIP_KERNEL void clhip_flip_bit(clhip_u32* p, clhip_u64 word, clhip_u32 mask)
{
    if (clhip_gid() == 0)
        p[word] ^= mask;
}
