// Prelude of every kernels/*.hip source. One source compiles under both run-time compilers:
// NVRTC (CUDA, defines __CUDACC_RTC__) and hiprtc (HIP, defines __HIPCC_RTC__). Neither needs
// an #include: NVRTC has threadIdx, float2, sqrtf and the atomics built in, and hiprtc
// pre-includes hip_runtime.h. Including cuda_runtime.h would fail under NVRTC, which has no
// toolkit headers on its search path.
//
// Sizes are 64-bit (unsigned long long) so a buffer of 2^31 words or more does not wrap; the
// host rounds the grid up to the block size, so every kernel bounds-checks its id.

#if !defined(__CUDACC_RTC__) && !defined(__HIPCC_RTC__)
#error "kernels/*.hip are compiled at run time by NVRTC or hiprtc"
#endif

// C linkage: the host looks kernels up by their plain names (cuModuleGetFunction /
// hipModuleGetFunction), so no C++ mangling.
#define CLHIP_KERNEL extern "C" __global__

typedef unsigned int clhip_u32;
typedef unsigned long long clhip_u64;

// This thread's linear index over a 1-D grid, in 64 bits.
__device__ inline clhip_u64 clhip_gid()
{
    return (clhip_u64)blockIdx.x * (clhip_u64)blockDim.x + (clhip_u64)threadIdx.x;
}
