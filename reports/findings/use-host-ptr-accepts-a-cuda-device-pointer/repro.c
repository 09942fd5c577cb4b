/*
 * clhip reproducer for nvidia0+cuda0/device+use-host-ptr/finish/handoff/n=1
 * Outcome clhip saw (reports/nvidia-h200-580.159.04-cuda13.0-house2-after-1368f97-full.json): crash: worker killed by SIGSEGV (signal 11)
 * Size: not shrunk (--no-shrink)
 * Data seed 0x4fa518b11c2ce523 = ops::data_seed(run seed 24301, handoff, 1)
 * Build: ./build.sh; run: ./repro. Exit 0: pass; 1: wrong data (clhip: fail); 2: an API
 *   call refused (unsupported); 3: a device memory fault (fault); a signal: a crash.
 * Driver fingerprint: README.md
 */
#define CL_TARGET_OPENCL_VERSION 300
#define CL_USE_DEPRECATED_OPENCL_1_2_APIS /* clCreateCommandQueue, as clhip calls it */
#include <CL/cl.h>
#include <cuda.h>
#include <nvrtc.h>
#include <ctype.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *cl_error_name(long long code)
{
    static const char *names[64] = {[4] = "CL_MEM_OBJECT_ALLOCATION_FAILURE", [5] = "CL_OUT_OF_RESOURCES",
        [6] = "CL_OUT_OF_HOST_MEMORY", [12] = "CL_MAP_FAILURE", [14] = "CL_EXEC_STATUS_ERROR_FOR_EVENTS_IN_WAIT_LIST",
        [30] = "CL_INVALID_VALUE", [37] = "CL_INVALID_HOST_PTR", [38] = "CL_INVALID_MEM_OBJECT",
        [50] = "CL_INVALID_ARG_VALUE", [52] = "CL_INVALID_KERNEL_ARGS", [54] = "CL_INVALID_WORK_GROUP_SIZE",
        [59] = "CL_INVALID_OPERATION", [61] = "CL_INVALID_BUFFER_SIZE", [63] = "CL_INVALID_GLOBAL_WORK_SIZE"};
    return code < 0 && code > -64 && names[-code] ? names[-code] : "an OpenCL error (CL/cl.h names its code)";
}

/* With CLHIP_PRINT_CALLS=FILE, the text of each call (CHECK's, CALL's) goes to FILE before it
   is made, as clhip records its own (docs/repro.md, "Calls"); call_scope marks steps that are
   not compared. Unset, nothing is written. */
static const char *call_scope;

static void said(const char *call)
{
    static FILE *out;
    static int opened;
    const char *path = opened++ ? NULL : getenv("CLHIP_PRINT_CALLS");
    if (path && *path && !(out = fopen(path, "w")))
        printf("ERROR: CLHIP_PRINT_CALLS: cannot write %s\n", path), exit(2);
    if (out)
        fprintf(out, "%s%s%s\n", call_scope ? call_scope : "", call_scope ? "/" : "", call), fflush(out);
}
#define CALL(call) (said(#call), (call))
enum api { CL, CU, NVRTC };
static int is_fault(CUresult r)
{
    return r == CUDA_ERROR_ILLEGAL_ADDRESS || r == CUDA_ERROR_LAUNCH_FAILED || r == CUDA_ERROR_ILLEGAL_INSTRUCTION ||
           r == CUDA_ERROR_MISALIGNED_ADDRESS;
}

/* Ends the program with code, or with 3 (clhip: fault) where a device fault is pending on the
   context: clhip asks cuCtxSynchronize after every case (ops::execute), because a library's
   error (cuBLAS's CUBLAS_STATUS_EXECUTION_FAILED) or a refusal can hide the sticky fault that
   caused it. */
static void finish(int code)
{
    const char *name = "an error";
    CUresult pending;
    if (code == 3)
        exit(3);
    call_scope = "pending-fault";
    said("cuCtxSynchronize()");
    pending = cuCtxSynchronize();
    call_scope = NULL;
    if (!is_fault(pending))
        exit(code);
    cuGetErrorName(pending, &name);
    printf("FAULT: a device fault is pending: cuCtxSynchronize() returned %s (%d) after the %s above\n", name,
           (int)pending, code == 0 ? "pass" : code == 1 ? "wrong data" : "error");
    exit(3);
}

/* Every API call goes through CHECK: an error ends the program naming the call, the error and
   its code, exit 3 for a device memory fault as clhip's ApiError::is_device_fault names one
   (clhip: fault), else 2 (clhip: unsupported) unless finish() finds a fault pending. */
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
    int fault = api == CL ? code == CL_OUT_OF_RESOURCES || code == CL_EXEC_STATUS_ERROR_FOR_EVENTS_IN_WAIT_LIST
                          : api == CU && is_fault((CUresult)code);
    printf("%s: line %d: %s returned %s (%lld)\n", fault ? "FAULT" : "ERROR", line, call, name, code);
    finish(fault ? 3 : 2);
}
#define CHECK(api, call) (said(#call), check(api, (long long)(call), #call, __LINE__))
/* Word i of the handoff pattern (generate::pattern_word, kernels/pattern.cl). */
static uint32_t pattern_word(uint32_t seed, uint32_t i)
{
    uint32_t x = i * 0x9E3779B1u + seed;
    x = (x ^ x >> 16) * 0x85EBCA6Bu;
    x = (x ^ x >> 13) * 0xC2B2AE35u;
    return x ^ x >> 16;
}

/* The case; its OpenCL device as clhip labels it (runtimes/opencl/devices.rs family) */
static const char *CL_LABEL = "nvidia0", *PLATFORM_WORD = "nvidia";
enum { CL_INDEX = 0 };
enum { PEER_ORDINAL = 0 };
static const uint64_t SEED = 0x4fa518b11c2ce523ull; /* the data seed */
static const size_t N = 1;
/* clhip's OpenCL kernels this case launches (the .cl files of kernels/) */
static const char *CL_SOURCE =
    "inline uint clhip_pattern_word(uint seed, uint i)\n"
    "{\n"
    "    uint x = i * 0x9E3779B1u + seed;\n"
    "    x ^= x >> 16;\n"
    "    x *= 0x85EBCA6Bu;\n"
    "    x ^= x >> 13;\n"
    "    x *= 0xC2B2AE35u;\n"
    "    x ^= x >> 16;\n"
    "    return x;\n"
    "}\n"
    "__kernel void pattern_fill(__global uint* p, uint seed, uint words)\n"
    "{\n"
    "    size_t gid = get_global_id(0);\n"
    "    if (gid >= (size_t)words)\n"
    "        return;\n"
    "    uint i = (uint)gid;\n"
    "    p[i] = clhip_pattern_word(seed, i);\n"
    "}\n"
    "__kernel void pattern_check(__global const uint* p, uint seed, uint words, __global uint* result)\n"
    "{\n"
    "    size_t gid = get_global_id(0);\n"
    "    if (gid >= (size_t)words)\n"
    "        return;\n"
    "    uint i = (uint)gid;\n"
    "    if (i == 0u)\n"
    "        result[2] = words;\n"
    "    if (p[i] != clhip_pattern_word(seed, i)) {\n"
    "        atomic_inc(&result[0]);\n"
    "        atomic_min(&result[1], i);\n"
    "    }\n"
    "}\n"
    "__kernel void pattern_observe(__global const uint* p, uint words, __global uint* result)\n"
    "{\n"
    "    if (get_global_id(0) == 0 && result[0] != 0u && result[1] < words)\n"
    "        result[3] = p[result[1]];\n"
    "}\n"
    ;
/* clhip's peer kernels this case launches (the .hip files of kernels/) */
static const char *PEER_SOURCE =
    "#define CLHIP_KERNEL extern \"C\" __global__\n"
    "typedef unsigned int clhip_u32;\n"
    "typedef unsigned long long clhip_u64;\n"
    "__device__ inline clhip_u64 clhip_gid()\n"
    "{\n"
    "    return (clhip_u64)blockIdx.x * (clhip_u64)blockDim.x + (clhip_u64)threadIdx.x;\n"
    "}\n"
    "__device__ inline clhip_u32 clhip_pattern_word(clhip_u32 seed, clhip_u32 i)\n"
    "{\n"
    "    clhip_u32 x = i * 0x9E3779B1u + seed;\n"
    "    x ^= x >> 16;\n"
    "    x *= 0x85EBCA6Bu;\n"
    "    x ^= x >> 13;\n"
    "    x *= 0xC2B2AE35u;\n"
    "    x ^= x >> 16;\n"
    "    return x;\n"
    "}\n"
    "CLHIP_KERNEL void clhip_pattern_fill(clhip_u32* p, clhip_u32 seed, clhip_u64 words)\n"
    "{\n"
    "    clhip_u64 i = clhip_gid();\n"
    "    if (i >= words)\n"
    "        return;\n"
    "    p[i] = clhip_pattern_word(seed, (clhip_u32)i);\n"
    "}\n"
    "CLHIP_KERNEL void clhip_pattern_check(const clhip_u32* p, clhip_u32 seed, clhip_u64 words,\n"
    "                                      clhip_u64* result)\n"
    "{\n"
    "    clhip_u64 i = clhip_gid();\n"
    "    if (i >= words)\n"
    "        return;\n"
    "    if (i == 0)\n"
    "        result[2] = words;\n"
    "    if (p[i] != clhip_pattern_word(seed, (clhip_u32)i)) {\n"
    "        atomicAdd(&result[0], 1ull);\n"
    "        atomicMin(&result[1], i);\n"
    "    }\n"
    "}\n"
    ;
static cl_device_id device;
static cl_context context;
static cl_command_queue queue;
static cl_program program;
static const uint32_t POISON = 0x7FF4DEADu; /* what new memory holds first (paths.rs) */

/* The device clhip labels CL_LABEL (device CL_INDEX of the platforms whose lower-cased name
   holds PLATFORM_WORD, in enumeration order), a context, an in-order queue, the kernels. */
static void cl_open(void)
{
    cl_platform_id platforms[16];
    cl_uint np = 0, seen = 0;
    cl_int err;
    call_scope = "open";
    CHECK(CL, clGetPlatformIDs(16, platforms, &np));
    for (cl_uint p = 0; p < np && !device; p++) {
        char name[256] = "";
        cl_device_id ids[16];
        cl_uint nd = 0;
        clGetPlatformInfo(platforms[p], CL_PLATFORM_NAME, sizeof name, name, NULL);
        for (char *c = name; *c; c++)
            *c = (char)tolower((unsigned char)*c);
        if (strstr(name, PLATFORM_WORD) && clGetDeviceIDs(platforms[p], CL_DEVICE_TYPE_ALL, 16, ids, &nd) == CL_SUCCESS)
            for (cl_uint d = 0; d < nd && !device; d++, seen++)
                device = seen == CL_INDEX ? ids[d] : NULL;
    }
    if (!device) {
        printf("ERROR: no OpenCL device %s on this machine\n", CL_LABEL);
        exit(2);
    }
    CHECK(CL, (context = clCreateContext(NULL, 1, &device, NULL, NULL, &err), err));
    CHECK(CL, (queue = clCreateCommandQueue(context, device, 0, &err), err));
    CHECK(CL, (program = clCreateProgramWithSource(context, 1, &CL_SOURCE, NULL, &err), err));
    if (clBuildProgram(program, 1, &device, "", NULL, NULL) != CL_SUCCESS) {
        static char log[8192];
        clGetProgramBuildInfo(program, device, CL_PROGRAM_BUILD_LOG, sizeof log, log, NULL);
        printf("ERROR: clBuildProgram failed:\n%s\n", log);
        exit(2);
    }
    call_scope = NULL;
}
/* A kernel argument: a buffer, an SVM (or raw device) pointer, or a uint. */
struct arg { int kind; cl_mem mem; void *svm; cl_uint u32; };
static struct arg mem(cl_mem m) { return (struct arg){.kind = 0, .mem = m}; }
static struct arg u32(cl_uint v) { return (struct arg){.kind = 2, .u32 = v}; }

/* A 1-D launch as clhip's (runtimes/opencl/session.rs): a fresh kernel object, the work-group
   size the largest power of two within 256 and the kernel's limit (never above the device's),
   the global size rounded up to it (every kernel bounds-checks its index). */
static cl_event launch(const char *name, size_t global, int nargs, const struct arg *args,
                       cl_uint nwait, const cl_event *wait)
{
    cl_int err;
    cl_kernel k;
    cl_event ev;
    size_t limit = 1, local = 1;
    CHECK(CL, (k = clCreateKernel(program, name, &err), err));
    for (cl_uint i = 0; i < (cl_uint)nargs; i++) {
        if (args[i].kind == 0) CHECK(CL, clSetKernelArg(k, i, sizeof(cl_mem), &args[i].mem));
        if (args[i].kind == 1) CHECK(CL, clSetKernelArgSVMPointer(k, i, args[i].svm));
        if (args[i].kind == 2) CHECK(CL, clSetKernelArg(k, i, sizeof(cl_uint), &args[i].u32));
    }
    CHECK(CL, clGetKernelWorkGroupInfo(k, device, CL_KERNEL_WORK_GROUP_SIZE, sizeof limit, &limit, NULL));
    while (local * 2 <= 256 && local * 2 <= limit && local < global)
        local *= 2;
    global = (global + local - 1) / local * local;
    CHECK(CL, clEnqueueNDRangeKernel(queue, k, 1, NULL, &global, &local, nwait, nwait ? wait : NULL, &ev));
    clReleaseKernel(k);
    return ev;
}
/* A plain buffer, not under test (clhip's DeviceBuffer): the poison word, then data if any. */
static cl_mem device_buffer(size_t bytes, const void *data)
{
    cl_int err;
    cl_mem b;
    CHECK(CL, (b = clCreateBuffer(context, CL_MEM_READ_WRITE, bytes, NULL, &err), err));
    CHECK(CL, clEnqueueFillBuffer(queue, b, &POISON, 4, 0, bytes, 0, NULL, NULL));
    if (data)
        CHECK(CL, clEnqueueWriteBuffer(queue, b, CL_TRUE, 0, bytes, data, 0, NULL, NULL));
    return b;
}
/* len complex elements of the poison word: a quiet NaN that fails every check. */
static float *poison_vec(size_t len)
{
    uint32_t *v = malloc(8 * len);
    for (size_t i = 0; i < 2 * len; i++)
        v[i] = POISON;
    return (float *)v;
}
/* OpenCL's bit-exact check (kernels/pattern.cl): pattern_check counts the mismatches into
   result[0], keeps the first index in result[1] and writes its ran-marker to result[2];
   pattern_observe puts the word seen there in result[3]. */
static cl_event cl_check_pattern(struct arg m, uint32_t seed, cl_mem result, cl_uint nwait,
                                 const cl_event *wait)
{
    cl_event checked = launch("pattern_check", 2 * N, 4, (struct arg[]){m, u32(seed), u32(2 * N), mem(result)}, nwait, wait);
    return launch("pattern_observe", 1, 3, (struct arg[]){m, u32(2 * N), mem(result)}, 1, &checked);
}

/* A bit-exact check's verdict from its words: the mismatches, the first one's index and the
   word seen there. */
static int pattern_verdict(const char *what, const uint64_t seen[3], uint32_t seed)
{
    if (seen[0])
        printf("FAIL: %s: %llu of %zu words differ (bit-exact), first at [%llu]: got 0x%08llx want 0x%08x\n",
               what, (unsigned long long)seen[0], 2 * N, (unsigned long long)seen[1],
               (unsigned long long)seen[2], pattern_word(seed, (uint32_t)seen[1]));
    else
        printf("%s: %zu words bit-exact\n", what, 2 * N);
    return seen[0] != 0;
}

/* OpenCL's check's result words (a blocking read: before the case, or after all its steps). */
static void read_words(cl_mem result, uint32_t r[4])
{
    CHECK(CL, clEnqueueReadBuffer(queue, result, CL_TRUE, 0, 16, r, 0, NULL, NULL));
}

/* The result words as written, read back before the case as clhip does: a dropped write shows
   here, not later as counters that make no sense. */
static void check_written(const char *what, cl_mem result, const uint32_t want[4])
{
    uint32_t r[4];
    read_words(result, r);
    if (memcmp(r, want, 16) != 0)
        printf("FAIL: %s, read back after clEnqueueWriteBuffer: {0x%08x, 0x%08x, 0x%08x, 0x%08x}, not the "
               "words written\n", what, r[0], r[1], r[2], r[3]), finish(1);
}

/* The verdict of OpenCL's check from its result words, read after the case's steps. */
static int cl_pattern_verdict(const char *what, const uint32_t r[4], uint32_t seed)
{
    if (r[2] != 2 * N)
        printf("FAIL: %s: OpenCL's check kernel did not run (ran-marker %u)\n", what, r[2]);
    return r[2] != 2 * N || pattern_verdict(what, (uint64_t[3]){r[0], r[1], r[3]}, seed);
}
/* The CUDA device as the peer (runtimes/cuda): its primary context, one blocking stream. */
static CUdevice cu_device;
static CUcontext cu_context;
static CUstream stream;
static CUdeviceptr scratch; /* the check kernel's result words, cpotrf's info */

static void peer_open(void)
{
    call_scope = "open"; /* clhip opens its peer once per worker */
    CHECK(CU, cuInit(0));
    CHECK(CU, cuDeviceGet(&cu_device, PEER_ORDINAL));
    CHECK(CU, cuDevicePrimaryCtxRetain(&cu_context, cu_device));
    CHECK(CU, cuCtxSetCurrent(cu_context));
    CHECK(CU, cuStreamCreate(&stream, 0));
    CHECK(CU, cuMemAlloc(&scratch, 24));
    call_scope = NULL;
}

static void peer_synchronize(void) { CHECK(CU, cuStreamSynchronize(stream)); }

static void peer_upload(uint64_t p, const void *data, size_t bytes)
{
    CHECK(CU, cuMemcpyHtoDAsync((CUdeviceptr)p, data, bytes, stream));
    peer_synchronize();
}

static void peer_download(uint64_t p, void *out, size_t bytes)
{
    CHECK(CU, cuMemcpyDtoHAsync(out, (CUdeviceptr)p, bytes, stream));
    peer_synchronize();
}
/* clhip's CUDA kernels, compiled by NVRTC to a cubin for the device's sm_XY, 256 threads a
   block (runtimes/gpu.rs BLOCK). */
static CUmodule module;

static void peer_load_kernels(void)
{
    nvrtcProgram prog;
    int major, minor;
    size_t size;
    char arch[64], *text;
    call_scope = "open";
    CHECK(CU, cuDeviceGetAttribute(&major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, cu_device));
    CHECK(CU, cuDeviceGetAttribute(&minor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, cu_device));
    snprintf(arch, sizeof arch, "--gpu-architecture=sm_%d%d", major, minor);
    const char *options[] = {arch, "--std=c++17"};
    CHECK(NVRTC, nvrtcCreateProgram(&prog, PEER_SOURCE, "clhip.hip", 0, NULL, NULL));
    if (nvrtcCompileProgram(prog, 2, options) != NVRTC_SUCCESS) {
        CHECK(NVRTC, nvrtcGetProgramLogSize(prog, &size));
        CHECK(NVRTC, nvrtcGetProgramLog(prog, text = malloc(size)));
        printf("ERROR: NVRTC could not compile the kernels for %s:\n%s\n", arch, text);
        exit(2);
    }
    CHECK(NVRTC, nvrtcGetCUBINSize(prog, &size));
    CHECK(NVRTC, nvrtcGetCUBIN(prog, text = malloc(size)));
    CHECK(CU, cuModuleLoadData(&module, text));
    call_scope = NULL;
}

static void peer_launch(const char *name, uint64_t threads, void **args)
{
    CUfunction f;
    CHECK(CU, cuModuleGetFunction(&f, module, name));
    CHECK(CU, cuLaunchKernel(f, (unsigned)((threads + 255) / 256), 1, 1, 256, 1, 1, 0, stream, args, NULL));
}
static void peer_fill_pattern(uint64_t p, uint32_t seed)
{
    unsigned long long ptr = p, words = 2 * N;
    void *args[] = {&ptr, &seed, &words};
    peer_launch("clhip_pattern_fill", words, args);
}

/* The peer's bit-exact check (kernels/pattern.hip): the mismatches, the first one's index and
   its word in seen[]; a check kernel that did not run ends the program. */
static void peer_check_pattern(uint64_t p, uint32_t seed, uint64_t seen[3])
{
    unsigned long long result[3] = {0, ~0ull, 0}, ptr = p, words = 2 * N, out = scratch;
    void *args[] = {&ptr, &seed, &words, &out};
    uint32_t word = 0;
    peer_upload(scratch, result, sizeof result);
    peer_launch("clhip_pattern_check", words, args);
    peer_download(scratch, result, sizeof result);
    if (result[2] != words) {
        printf("FAIL: the peer's check kernel did not run (ran-marker %llu)\n", result[2]);
        finish(1);
    }
    if (result[0]) { /* the word itself, read where it lies */
        call_scope = "mismatch";
        peer_download(p + 4 * result[1], &word, 4);
        call_scope = NULL;
    }
    seen[0] = result[0], seen[1] = result[1], seen[2] = word;
}

static int run_case(void)
{
    uint32_t a = (uint32_t)(SEED ^ (SEED >> 32)), b = a ^ 0x55555555u, c = a ^ 0xAAAAAAAAu;
    const uint32_t init[4] = {0, 0xFFFFFFFFu, 0, 0};
    uint64_t seen_b[3] = {0, 0, 0};
    uint32_t words_a[4], words_c[4];
    cl_mem result_a, result_c;
    cl_int err;
    uint64_t m_peer;
    CUdeviceptr m_dev;
    cl_mem m_buf;
    cl_event checked1;
    setvbuf(stdout, NULL, _IOLBF, 0);
    cl_open();
    peer_open();
    peer_load_kernels();
    /* ops/handoff.rs: the peer writes pattern a; OpenCL checks it and writes b; the peer checks b and writes c; OpenCL checks c */
    result_a = device_buffer(16, init);
    check_written("OpenCL pattern check's result buffer for the pattern written by cuda0", result_a, init);
    result_c = device_buffer(16, init);
    check_written("OpenCL pattern check's result buffer for the pattern rewritten by cuda0", result_c, init);
    puts("-- device+use-host-ptr memory m of N complex floats");
    /* a device allocation handed to CL_MEM_USE_HOST_PTR as if it were host memory */
    CHECK(CU, cuMemAlloc(&m_dev, 8 * N));
    CHECK(CL, (m_buf = clCreateBuffer(context, CL_MEM_READ_WRITE | CL_MEM_USE_HOST_PTR, 8 * N, (void *)(uintptr_t)m_dev, &err), err));
    m_peer = m_dev;
    /* new memory holds the poison word, written by the API that allocated it */
    CHECK(CL, clEnqueueFillBuffer(queue, m_buf, &POISON, 4, 0, 8 * N, 0, NULL, NULL));
    CHECK(CL, clFinish(queue));
    peer_upload(m_peer, poison_vec(N), 8 * N);
    peer_synchronize();
    /* hand m to the peer (sync finish) */
    CHECK(CL, clFinish(queue));
    puts("-- cuda0 writes pattern a");
    peer_fill_pattern(m_peer, a);
    peer_synchronize();
    /* hand m back to OpenCL (sync finish) */
    peer_synchronize();
    puts("-- OpenCL checks pattern a, writes pattern b");
    checked1 = cl_check_pattern(mem(m_buf), a, result_a, 0, NULL);
    launch("pattern_fill", 2 * N, 3, (struct arg[]){mem(m_buf), u32(b), u32(2 * N)}, 1, &checked1);
    /* hand m to the peer (sync finish) */
    CHECK(CL, clFinish(queue));
    puts("-- cuda0 checks pattern b, writes pattern c");
    peer_check_pattern(m_peer, b, seen_b);
    peer_fill_pattern(m_peer, c);
    peer_synchronize();
    /* hand m back to OpenCL (sync finish) */
    peer_synchronize();
    puts("-- OpenCL checks pattern c");
    cl_check_pattern(mem(m_buf), c, result_c, 0, NULL);
    puts("-- release m");
    CHECK(CL, clFinish(queue));
    peer_synchronize();
    CHECK(CL, clReleaseMemObject(m_buf));
    CHECK(CU, cuMemFree(m_dev));
    /* every step has run: OpenCL's result words read, then the verdicts (bit-exact), the first wrong crossing first */
    read_words(result_a, words_a);
    read_words(result_c, words_c);
    if (cl_pattern_verdict("pattern written by cuda0, read by OpenCL", words_a, a) ||
        pattern_verdict("pattern written by OpenCL, read by cuda0", seen_b, b) ||
        cl_pattern_verdict("pattern rewritten by cuda0, read by OpenCL", words_c, c))
        return 1;
    printf("PASS: %zu words bit-exact across 4 crossings\n", 2 * N);
    return 0;
}

/* The case's verdict, or a fault where one is pending on the device after it. */
int main(void)
{
    finish(run_case());
}
