/*@ includes @*/
#include <cuda.h>
#include <nvrtc.h>
/*@ include_cublas @*/
#include <cublas_v2.h>
/*@ include_cusolver @*/
#include <cusolverDn.h>
/*@ check @*/
/* Every API call goes through CHECK: an error ends the program with the call, its error name
   and code. Exit 3 for a device memory fault (clhip: fault), 2 for any other refusal (clhip:
   unsupported), 1 for wrong data (clhip: fail), 0 for a pass; a crash is the signal. */
enum api { CL, CU, NVRTC, CUBLAS, CUSOLVER };
static void check(enum api api, long long code, const char *call, int line)
{
    const char *name = "an error";
    if (code == 0)
        return;
    if (api == CL)
        name = cl_error_name(code);
    if (api == CU)
        cuGetErrorName((CUresult)code, &name);
    if (api == NVRTC)
        name = nvrtcGetErrorString((nvrtcResult)code);
    /*@@ more names @@*/
    /* as clhip's ApiError::is_device_fault: a kernel's illegal address as each API reports it */
    int fault = api == CL ? code == -5 || code == -14
                          : api == CU && (code == 700 || code == 715 || code == 716 || code == 719);
    printf("%s: line %d: %s returned %s (%lld)\n", fault ? "FAULT" : "ERROR", line, call, name,
           code);
    exit(fault ? 3 : 2);
}
#define CHECK(api, call) check(api, (long long)(call), #call, __LINE__)
/*@ cuda_peer @*/
/* The CUDA device as the peer (runtimes/cuda, runtimes/gpu.rs): its primary context, one
   blocking stream, clhip's CUDA kernels compiled by NVRTC to a cubin for its sm_XY. */
static CUcontext cu_context;
static CUstream stream;
static CUevent event;
static CUmodule module;
static CUdeviceptr scratch; /* pattern_check's three result words, cpotrf's info */

static void peer_open(void)
{
    CUdevice dev;
    nvrtcProgram prog;
    int major, minor;
    size_t size;
    char arch[64];
    CHECK(CU, cuInit(0));
    CHECK(CU, cuDeviceGet(&dev, CUDA_ORDINAL));
    CHECK(CU, cuDevicePrimaryCtxRetain(&cu_context, dev));
    CHECK(CU, cuCtxSetCurrent(cu_context));
    CHECK(CU, cuStreamCreate(&stream, 0));
    CHECK(CU, cuEventCreate(&event, CU_EVENT_DISABLE_TIMING));
    CHECK(CU, cuMemAlloc(&scratch, 24));
    CHECK(CU, cuDeviceGetAttribute(&major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, dev));
    CHECK(CU, cuDeviceGetAttribute(&minor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, dev));
    snprintf(arch, sizeof arch, "--gpu-architecture=sm_%d%d", major, minor);
    const char *options[] = {arch, "--std=c++17"};
    CHECK(NVRTC, nvrtcCreateProgram(&prog, CUDA_SOURCE, "clhip.hip", 0, NULL, NULL));
    if (nvrtcCompileProgram(prog, 2, options) != NVRTC_SUCCESS) {
        static char log[8192];
        nvrtcGetProgramLog(prog, log);
        printf("ERROR: NVRTC could not compile the kernels for %s:\n%s\n", arch, log);
        exit(2);
    }
    CHECK(NVRTC, nvrtcGetCUBINSize(prog, &size));
    char *cubin = malloc(size);
    CHECK(NVRTC, nvrtcGetCUBIN(prog, cubin));
    CHECK(CU, cuModuleLoadData(&module, cubin));
}

/* 256 threads a block, enough blocks for `threads` (runtimes/gpu.rs BLOCK, grid). */
static void cuda_launch(const char *name, uint64_t threads, void **args)
{
    CUfunction f;
    if (threads == 0)
        return;
    CHECK(CU, cuModuleGetFunction(&f, module, name));
    CHECK(CU, cuLaunchKernel(f, (unsigned)((threads + 255) / 256), 1, 1, 256, 1, 1, 0, stream,
                             args, NULL));
}

static void peer_synchronize(void) { CHECK(CU, cuStreamSynchronize(stream)); }

/* The `event` sync's peer half: an event after the work so far, waited for on the host. */
static void peer_event_sync(void)
{
    CHECK(CU, cuEventRecord(event, stream));
    CHECK(CU, cuEventSynchronize(event));
}

static void copy_in(uint64_t dst, const void *src, size_t bytes)
{
    CHECK(CU, cuMemcpyHtoDAsync((CUdeviceptr)dst, src, bytes, stream));
    peer_synchronize();
}

static void copy_out(void *dst, uint64_t src, size_t bytes)
{
    CHECK(CU, cuMemcpyDtoHAsync(dst, (CUdeviceptr)src, bytes, stream));
    peer_synchronize();
}

static void peer_upload(uint64_t p, const float *data, size_t len) { copy_in(p, data, 8 * len); }

static void peer_download(uint64_t p, float *out, size_t len) { copy_out(out, p, 8 * len); }
/*@ cuda_pattern @*/
static void peer_fill_pattern(uint64_t p, size_t len, uint32_t seed)
{
    unsigned long long ptr = p, words = 2 * len;
    void *args[] = {&ptr, &seed, &words};
    cuda_launch("clhip_pattern_fill", words, args);
}

/* Returns the mismatches; the first one's index and word in *first, *got. */
static size_t peer_check_pattern(uint64_t p, size_t len, uint32_t seed, size_t *first,
                                 uint32_t *got)
{
    unsigned long long result[3] = {0, ~0ull, 0}, ptr = p, words = 2 * len, out = scratch;
    void *args[] = {&ptr, &seed, &words, &out};
    copy_in(scratch, result, sizeof result);
    cuda_launch("clhip_pattern_check", words, args);
    copy_out(result, scratch, sizeof result);
    if (result[2] != words) {
        printf("FAIL: the CUDA check kernel did not run (ran-marker %llu, want %llu)\n", result[2],
               words);
        exit(1);
    }
    if (result[0] == 0)
        return 0;
    *first = (size_t)result[1];
    copy_out(got, p + 4 * result[1], 4); /* the word itself, read where it lies */
    return (size_t)result[0];
}
/*@ cuda_elementwise @*/
static void peer_scale(uint64_t p, size_t len, float s)
{
    unsigned long long ptr = p, n = len;
    void *args[] = {&ptr, &s, &n};
    cuda_launch("clhip_cscale", n, args);
}

static void peer_magnitude(uint64_t p, size_t len)
{
    unsigned long long ptr = p, n = len;
    void *args[] = {&ptr, &n};
    cuda_launch("clhip_cmagnitude", n, args);
}
/*@ cublas @*/
/* cuBLAS on the peer's stream, host pointer mode (runtimes/cuda/blas.rs). */
static void peer_cgemm(size_t n, cuComplex alpha, uint64_t a, uint64_t b, cuComplex beta,
                       uint64_t c)
{
    static cublasHandle_t blas;
    if (!blas) {
        CHECK(CUBLAS, cublasCreate(&blas));
        CHECK(CUBLAS, cublasSetStream(blas, (cudaStream_t)stream));
        CHECK(CUBLAS, cublasSetPointerMode(blas, CUBLAS_POINTER_MODE_HOST));
    }
    CHECK(CUBLAS, cublasCgemm(blas, CUBLAS_OP_N, CUBLAS_OP_N, (int)n, (int)n, (int)n, &alpha,
                              (const cuComplex *)(uintptr_t)a, (int)n,
                              (const cuComplex *)(uintptr_t)b, (int)n, &beta,
                              (cuComplex *)(uintptr_t)c, (int)n));
}
/*@ cusolver @*/
/* cuSOLVER's cpotrf on the peer's stream, lower triangle, info read back from the device
   (runtimes/cuda/blas.rs). */
static int peer_cpotrf(size_t n, uint64_t a)
{
    static cusolverDnHandle_t solver;
    int lwork = 0, info = 0;
    CUdeviceptr work;
    cuComplex *m = (cuComplex *)(uintptr_t)a;
    if (!solver) {
        CHECK(CUSOLVER, cusolverDnCreate(&solver));
        CHECK(CUSOLVER, cusolverDnSetStream(solver, (cudaStream_t)stream));
    }
    CHECK(CUSOLVER, cusolverDnCpotrf_bufferSize(solver, CUBLAS_FILL_MODE_LOWER, (int)n, m, (int)n,
                                                &lwork));
    CHECK(CU, cuMemAlloc(&work, 8 * (size_t)(lwork > 1 ? lwork : 1)));
    CHECK(CUSOLVER, cusolverDnCpotrf(solver, CUBLAS_FILL_MODE_LOWER, (int)n, m, (int)n,
                                     (cuComplex *)(uintptr_t)work, lwork,
                                     (int *)(uintptr_t)scratch));
    copy_out(&info, scratch, 4);
    CHECK(CU, cuMemFree(work));
    return info;
}
/*@ end @*/
