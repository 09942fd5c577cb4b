/*
 * clhip reproducer for nvidia0+cuda0/copy/finish/cholesky/n=178
 * Outcome clhip saw (a run of this build on this machine): fail: cpotrf info on cuda0 (non-HPD input): 1 of 1 elements out of bound, first at [0] got info = 65 want info = 64; max abs err 1.000e0, max rel err 0.000e0, bound 0.000e0 = info == LAPACK's: 0 if HPD, else 1-based order of the first non-PD leading minor (rocSOLVER clients)
 * Size: not shrunk (--no-shrink)
 * Data: clhip's seeded draw (ChaCha20 keyed by the data seed, generate.rs); not simplified (--no-shrink)
 * Data seed 0x6674ac19dd0b66c0 = ops::data_seed(run seed 1, cholesky, 178)
 * Build: ./build.sh; run: ./repro. Exit 0: pass; 1: wrong data (clhip: fail); 2: an API
 *   call refused (unsupported); 3: a device memory fault (fault); a signal: a crash.
 * Driver fingerprint: README.md
 */
#define CL_TARGET_OPENCL_VERSION 300
#define CL_USE_DEPRECATED_OPENCL_1_2_APIS /* clCreateCommandQueue, as clhip calls it */
#include <CL/cl.h>
#include <cuda.h>
#include <cusolverDn.h>
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
enum api { CL, CU, CUSOLVER };
/* Every API call goes through CHECK: an error ends the program naming the call, the error and
   its code, exit 3 for a device memory fault as clhip's ApiError::is_device_fault names one
   (clhip: fault), else 2 (clhip: unsupported). */
static void check(enum api api, long long code, const char *call, int line)
{
    const char *name = "an error";
    if (code == 0)
        return;
    if (api == CL)
        name = cl_error_name(code);
    if (api == CU)
        cuGetErrorName((CUresult)code, &name);
    int fault = api == CL ? code == CL_OUT_OF_RESOURCES || code == CL_EXEC_STATUS_ERROR_FOR_EVENTS_IN_WAIT_LIST
                          : api == CU && (code == CUDA_ERROR_ILLEGAL_ADDRESS || code == CUDA_ERROR_LAUNCH_FAILED ||
                                          code == CUDA_ERROR_ILLEGAL_INSTRUCTION || code == CUDA_ERROR_MISALIGNED_ADDRESS);
    printf("%s: line %d: %s returned %s (%lld)\n", fault ? "FAULT" : "ERROR", line, call, name, code);
    exit(fault ? 3 : 2);
}
#define CHECK(api, call) (said(#call), check(api, (long long)(call), #call, __LINE__))
/* clhip's generator (src/generate.rs): RFC 8439 ChaCha20, zero nonce, block counter from 0,
   keyed by seed | stream tag | "clhip/generate/1" (little-endian, as on x86-64); values come
   from its 32-bit words in order. */
struct stream { uint32_t key[8], block[16], counter, used; };

static uint32_t rotl(uint32_t x, int r) { return x << r | x >> (32 - r); }

static uint32_t next_word(struct stream *s)
{
    /* each double round: the four columns, then the four diagonals */
    static const int q[8][4] = {{0, 4, 8, 12}, {1, 5, 9, 13}, {2, 6, 10, 14}, {3, 7, 11, 15},
                                {0, 5, 10, 15}, {1, 6, 11, 12}, {2, 7, 8, 13}, {3, 4, 9, 14}};
    if (s->used == 16) {
        uint32_t in[16] = {0x61707865, 0x3320646e, 0x79622d32, 0x6b206574}, x[16];
        memcpy(in + 4, s->key, 32);
        in[12] = s->counter++;
        memcpy(x, in, sizeof x);
        for (int i = 0; i < 80; i++) {
            uint32_t *a = &x[q[i % 8][0]], *b = &x[q[i % 8][1]], *c = &x[q[i % 8][2]], *d = &x[q[i % 8][3]];
            *a += *b, *d = rotl(*d ^ *a, 16), *c += *d, *b = rotl(*b ^ *c, 12);
            *a += *b, *d = rotl(*d ^ *a, 8), *c += *d, *b = rotl(*b ^ *c, 7);
        }
        for (int i = 0; i < 16; i++)
            s->block[i] = x[i] + in[i];
        s->used = 0;
    }
    return s->block[s->used++];
}

static struct stream stream_of(uint64_t seed, const char tag[8])
{
    struct stream s = {.used = 16};
    memcpy(s.key, &seed, 8), memcpy(s.key + 2, tag, 8), memcpy(s.key + 4, "clhip/generate/1", 16);
    return s;
}
/* B B^H + n I, column-major n x n (generate.rs hpd_from): exactly Hermitian and exact in float
   for B's entries (sixteenths or small integers), so its bits are clhip's. */
static float *hpd_from(float *b, size_t n)
{
    float *a = malloc(8 * n * n);
    for (size_t j = 0; j < n; j++)
        for (size_t i = j; i < n; i++) {
            double re = 0, im = 0; /* sum over k of b(i,k) * conj(b(j,k)) */
            for (size_t k = 0; k < n; k++) {
                double ar = b[2 * (i + k * n)], ai = b[2 * (i + k * n) + 1];
                double br = b[2 * (j + k * n)], bi = b[2 * (j + k * n) + 1];
                re += ar * br + ai * bi, im += ai * br - ar * bi;
            }
            if (i == j) {
                a[2 * (j + j * n)] = (float)(re + (double)n), a[2 * (j + j * n) + 1] = 0.0f;
            } else {
                a[2 * (i + j * n)] = (float)re, a[2 * (i + j * n) + 1] = (float)im;
                a[2 * (j + i * n)] = (float)re, a[2 * (j + i * n) + 1] = -(float)im;
            }
        }
    free(b);
    return a;
}
/* Multiples of 1/16 in [-0.5, 0.5]: products and their sums are exact in double. */
static float sixteenth(uint32_t x) { return (float)(((uint64_t)x * 17) >> 32) / 16.0f - 0.5f; }

static float *sixteenths(struct stream *s, size_t n)
{
    float *b = malloc(8 * n * n);
    for (size_t i = 0; i < 2 * n * n; i++)
        b[i] = sixteenth(next_word(s));
    return b;
}

/* generate::hpd_matrix(seed, n, n): B of sixteenths from stream "hpd". */
static float *hpd_matrix(uint64_t seed, size_t n)
{
    struct stream s = stream_of(seed, "hpd\0\0\0\0\0");
    return hpd_from(sixteenths(&s, n), n);
}

/* generate::non_hpd_matrix(seed, n, n): as hpd_matrix from stream "nonhpd", then diagonal
   entry k negated, k drawn after B; cpotrf must stop at info = k + 1. */
static float *non_hpd_matrix(uint64_t seed, size_t n, size_t *info)
{
    struct stream s = stream_of(seed, "nonhpd\0\0");
    float *a = hpd_from(sixteenths(&s, n), n);
    size_t k = 0;
    if (n > 1) {
        uint64_t lo = next_word(&s), hi = next_word(&s);
        k = (size_t)(((unsigned __int128)(lo | hi << 32) * n) >> 64);
    }
    a[2 * (k + k * n)] = -a[2 * (k + k * n)], a[2 * (k + k * n) + 1] = -a[2 * (k + k * n) + 1];
    *info = k + 1;
    return a;
}

/* The case; its OpenCL device as clhip labels it (runtimes/opencl/devices.rs family) */
static const char *CL_LABEL = "nvidia0", *PLATFORM_WORD = "nvidia";
enum { CL_INDEX = 0 };
enum { PEER_ORDINAL = 0 };
static const uint64_t SEED = 0x6674ac19dd0b66c0ull; /* the data seed */
static const size_t N = 178;
/* clhip's OpenCL kernels this case launches (the .cl files of kernels/) */
static const char *CL_SOURCE =
    "__kernel void ccopy(__global const float2* src, __global float2* dst, uint n)\n"
    "{\n"
    "    size_t i = get_global_id(0);\n"
    "    if (i >= (size_t)n)\n"
    "        return;\n"
    "    dst[i] = src[i];\n"
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
/* The f64 lower Cholesky factor of a (clhip's reference::cholesky: the lower triangle and the
   diagonal's real part are read); returns LAPACK's info: 0, or where a pivot <= 0 stopped it. */
static size_t reference_cholesky(const float *a, size_t n, double *l)
{
    memset(l, 0, 16 * n * n);
    for (size_t j = 0; j < n; j++) {
        double d = a[2 * (j + j * n)];
        for (size_t k = 0; k < j; k++)
            d -= l[2 * (j + k * n)] * l[2 * (j + k * n)] + l[2 * (j + k * n) + 1] * l[2 * (j + k * n) + 1];
        if (!(d > 0))
            return j + 1;
        l[2 * (j + j * n)] = d = sqrt(d);
        for (size_t i = j + 1; i < n; i++) {
            double sr = a[2 * (i + j * n)], si = a[2 * (i + j * n) + 1];
            for (size_t k = 0; k < j; k++) { /* minus l(i,k) * conj(l(j,k)) */
                double xr = l[2 * (i + k * n)], xi = l[2 * (i + k * n) + 1];
                double yr = l[2 * (j + k * n)], yi = l[2 * (j + k * n) + 1];
                sr -= xr * yr + xi * yi, si -= xi * yr - xr * yi;
            }
            l[2 * (i + j * n)] = sr / d, l[2 * (i + j * n) + 1] = si / d;
        }
    }
    return 0;
}

/* clhip's cpotrf bound (tolerance.rs check_cholesky, rocSOLVER clients):
     ||L_ref - L||_F / ||L_ref||_F <= n * eps32 over the lower triangle, eps32 = 2^-23. */
static int check_cholesky(const char *what, const float *got, const double *want, size_t n)
{
    double d2 = 0, r2 = 0, max = -1;
    size_t at = 0;
    for (size_t j = 0; j < n; j++)
        for (size_t i = j; i < n; i++) {
            size_t p = i + j * n;
            double dr = got[2 * p] - want[2 * p], di = got[2 * p + 1] - want[2 * p + 1];
            double e = isnan(dr) || isnan(di) ? NAN : hypot(dr, di);
            d2 += e * e, r2 += want[2 * p] * want[2 * p] + want[2 * p + 1] * want[2 * p + 1];
            if (isnan(e) ? !isnan(max) : e > max)
                max = e, at = p;
        }
    double rel = sqrt(d2) / sqrt(r2), bound = (double)(n > 1 ? n : 1) * 0x1p-23;
    printf("%s: ||L_ref - L||_F / ||L_ref||_F = %.3e, bound n * eps32 = %.3e\n", what, rel, bound);
    if (!(rel <= bound))
        printf("FAIL: the factor is out of bound; its largest error is at [%zu] (row %zu, column "
               "%zu): got (%.8e, %.8e) want (%.8e, %.8e)\n", at, at % n, at / n, got[2 * at],
               got[2 * at + 1], want[2 * at], want[2 * at + 1]);
    return !(rel <= bound);
}
/* Page-aligned, zeroed host memory (runtimes/host.rs alloc_pageable). */
static uint64_t host_alloc(size_t len)
{
    size_t bytes = (8 * len + 4095) / 4096 * 4096;
    said("host_alloc");
    return (uintptr_t)memset(aligned_alloc(4096, bytes), 0, bytes);
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
/* cuSOLVER's cpotrf of the lower triangle on the peer's stream; info read back from the
   device (runtimes/cuda/blas.rs). */
static int peer_cpotrf(uint64_t a)
{
    static cusolverDnHandle_t solver;
    int lwork = 0, info = 0;
    CUdeviceptr work;
    if (!solver) {
        CHECK(CUSOLVER, cusolverDnCreate(&solver));
        CHECK(CUSOLVER, cusolverDnSetStream(solver, (cudaStream_t)stream));
    }
    CHECK(CUSOLVER, cusolverDnCpotrf_bufferSize(solver, CUBLAS_FILL_MODE_LOWER, (int)N, (cuComplex *)(uintptr_t)a, (int)N, &lwork));
    CHECK(CU, cuMemAlloc(&work, 8 * (size_t)(lwork > 1 ? lwork : 1)));
    CHECK(CUSOLVER, cusolverDnCpotrf(solver, CUBLAS_FILL_MODE_LOWER, (int)N, (cuComplex *)(uintptr_t)a, (int)N,
                                     (cuComplex *)(uintptr_t)work, lwork, (int *)(uintptr_t)scratch));
    CHECK(CU, cuMemcpyDtoHAsync(&info, scratch, 4, stream));
    peer_synchronize();
    CHECK(CU, cuMemFree(work));
    return info;
}

int main(void)
{
    size_t bad_info_want, want_info;
    float *hpd = hpd_matrix(SEED, N), *non_hpd = non_hpd_matrix(SEED + 1, N, &bad_info_want), *got = malloc(8 * N * N);
    double *want = malloc(16 * N * N), *scratch_l = malloc(16 * N * N);
    int info, bad_info;
    cl_int err;
    uint64_t m_peer, m_staging;
    cl_mem m_buf, m_in, m_out;
    CUdeviceptr m_dev;
    cl_event ev1, read2, written3, ev4, read5;
    setvbuf(stdout, NULL, _IOLBF, 0);
    cl_open();
    peer_open();
    /* ops/cholesky.rs: OpenCL writes an HPD matrix, the peer's cpotrf factors it in place, OpenCL reads the factor back; then the same memory takes a non-HPD matrix, whose info must be the reference's */
    puts("-- copy memory m of N * N complex floats");
    /* copy: an OpenCL buffer; data crosses through host staging memory */
    CHECK(CL, (m_buf = clCreateBuffer(context, CL_MEM_READ_WRITE, 8 * N * N, NULL, &err), err));
    m_staging = host_alloc(N * N);
    CHECK(CU, cuMemAlloc(&m_dev, 8 * N * N));
    m_peer = m_dev;
    /* new memory holds the poison word, written by the API that allocated it */
    CHECK(CL, clEnqueueFillBuffer(queue, m_buf, &POISON, 4, 0, 8 * N * N, 0, NULL, NULL));
    CHECK(CL, clFinish(queue));
    peer_upload(m_peer, poison_vec(N * N), 8 * N * N);
    peer_synchronize();
    puts("-- OpenCL writes hpd into m");
    m_in = device_buffer(8 * N * N, hpd);
    ev1 = launch("ccopy", N * N, 3, (struct arg[]){mem(m_in), mem(m_buf), u32(N * N)}, 0, NULL);
    clReleaseMemObject(m_in);
    /* hand m to the peer (sync finish) */
    CHECK(CL, clEnqueueReadBuffer(queue, m_buf, CL_FALSE, 0, 8 * N * N, (void *)(uintptr_t)m_staging, 1, &ev1, &read2));
    CHECK(CL, clFinish(queue));
    peer_upload(m_peer, (void *)(uintptr_t)m_staging, 8 * N * N);
    puts("-- cpotrf on cuda0 (HPD)");
    info = peer_cpotrf(m_peer);
    /* hand m back to OpenCL (sync finish) */
    peer_synchronize();
    peer_download(m_peer, (void *)(uintptr_t)m_staging, 8 * N * N);
    CHECK(CL, clEnqueueWriteBuffer(queue, m_buf, CL_FALSE, 0, 8 * N * N, (void *)(uintptr_t)m_staging, 0, NULL, &written3));
    CHECK(CL, clFinish(queue));
    puts("-- OpenCL reads m back");
    m_out = device_buffer(8 * N * N, NULL);
    launch("ccopy", N * N, 3, (struct arg[]){mem(m_buf), mem(m_out), u32(N * N)}, 0, NULL);
    CHECK(CL, clEnqueueReadBuffer(queue, m_out, CL_TRUE, 0, 8 * N * N, got, 0, NULL, NULL));
    puts("-- OpenCL writes non_hpd into m");
    m_in = device_buffer(8 * N * N, non_hpd);
    ev4 = launch("ccopy", N * N, 3, (struct arg[]){mem(m_in), mem(m_buf), u32(N * N)}, 0, NULL);
    clReleaseMemObject(m_in);
    /* hand m to the peer (sync finish) */
    CHECK(CL, clEnqueueReadBuffer(queue, m_buf, CL_FALSE, 0, 8 * N * N, (void *)(uintptr_t)m_staging, 1, &ev4, &read5));
    CHECK(CL, clFinish(queue));
    peer_upload(m_peer, (void *)(uintptr_t)m_staging, 8 * N * N);
    puts("-- cpotrf on cuda0 (non-HPD)");
    bad_info = peer_cpotrf(m_peer);
    puts("-- release m");
    CHECK(CL, clFinish(queue));
    peer_synchronize();
    CHECK(CL, clReleaseMemObject(m_buf));
    CALL(free((void *)(uintptr_t)m_staging));
    CHECK(CU, cuMemFree(m_dev));
    /* info must be LAPACK's: 0 if HPD, else the 1-based order of the first non-PD leading minor (rocSOLVER clients) */
    if (info != 0) {
        printf("FAIL: cpotrf info on cuda0 (HPD input): got info = %d want info = 0\n", info);
        return 1;
    }
    if (reference_cholesky(hpd, N, want) != 0) {
        puts("ERROR: the generator's HPD matrix did not factor in double");
        return 2;
    }
    if (check_cholesky("cpotrf factor on cuda0 read back through OpenCL", got, want, N))
        return 1;
    want_info = reference_cholesky(non_hpd, N, scratch_l);
    if ((size_t)bad_info != want_info) {
        printf("FAIL: cpotrf info on cuda0 (non-HPD input): got info = %d want info = %zu\n", bad_info, want_info);
        return 1;
    }
    printf("PASS: within the bound; non-HPD info %d as the reference (the generator says %zu)\n", bad_info, bad_info_want);
    return 0;
}
