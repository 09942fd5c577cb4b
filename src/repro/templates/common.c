/*@ includes @*/
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/*@ cl_decls @*/
/* The OpenCL 3.0 declarations this file uses, as in Khronos OpenCL-Headers CL/cl.h (x86-64
   Linux ABI), so that it builds where no OpenCL headers are installed. */
typedef int32_t cl_int;
typedef uint32_t cl_uint;
typedef uint64_t cl_ulong;
typedef cl_ulong cl_bitfield;
typedef struct _cl_platform_id *cl_platform_id;
typedef struct _cl_device_id *cl_device_id;
typedef struct _cl_context *cl_context;
typedef struct _cl_command_queue *cl_command_queue;
typedef struct _cl_mem *cl_mem;
typedef struct _cl_program *cl_program;
typedef struct _cl_kernel *cl_kernel;
typedef struct _cl_event *cl_event;
enum {
    CL_SUCCESS = 0, CL_FALSE = 0, CL_TRUE = 1, CL_PLATFORM_NAME = 0x0902,
    CL_DEVICE_MAX_WORK_GROUP_SIZE = 0x1004, CL_DEVICE_NAME = 0x102B,
    CL_DEVICE_SVM_CAPABILITIES = 0x1053, CL_PROGRAM_BUILD_LOG = 0x1183,
    CL_KERNEL_WORK_GROUP_SIZE = 0x11B0, CL_MEM_READ_WRITE = 1 << 0, CL_MEM_READ_ONLY = 1 << 2,
    CL_MEM_USE_HOST_PTR = 1 << 3, CL_MEM_COPY_HOST_PTR = 1 << 5,
    CL_MEM_SVM_FINE_GRAIN_BUFFER = 1 << 10, CL_MAP_READ = 1 << 0, CL_MAP_WRITE = 1 << 1,
    CL_MAP_WRITE_INVALIDATE_REGION = 1 << 2,
};
static const cl_bitfield CL_DEVICE_TYPE_ALL = 0xFFFFFFFF;
cl_int clGetPlatformIDs(cl_uint, cl_platform_id *, cl_uint *);
cl_int clGetPlatformInfo(cl_platform_id, cl_uint, size_t, void *, size_t *);
cl_int clGetDeviceIDs(cl_platform_id, cl_bitfield, cl_uint, cl_device_id *, cl_uint *);
cl_int clGetDeviceInfo(cl_device_id, cl_uint, size_t, void *, size_t *);
cl_context clCreateContext(const intptr_t *, cl_uint, const cl_device_id *,
                           void (*)(const char *, const void *, size_t, void *), void *,
                           cl_int *);
cl_command_queue clCreateCommandQueue(cl_context, cl_device_id, cl_bitfield, cl_int *);
cl_program clCreateProgramWithSource(cl_context, cl_uint, const char **, const size_t *,
                                     cl_int *);
cl_int clBuildProgram(cl_program, cl_uint, const cl_device_id *, const char *,
                      void (*)(cl_program, void *), void *);
cl_int clGetProgramBuildInfo(cl_program, cl_device_id, cl_uint, size_t, void *, size_t *);
cl_kernel clCreateKernel(cl_program, const char *, cl_int *);
cl_int clSetKernelArg(cl_kernel, cl_uint, size_t, const void *);
cl_int clSetKernelArgSVMPointer(cl_kernel, cl_uint, const void *);
cl_int clGetKernelWorkGroupInfo(cl_kernel, cl_device_id, cl_uint, size_t, void *, size_t *);
cl_int clReleaseKernel(cl_kernel);
cl_int clEnqueueNDRangeKernel(cl_command_queue, cl_kernel, cl_uint, const size_t *,
                              const size_t *, const size_t *, cl_uint, const cl_event *,
                              cl_event *);
cl_mem clCreateBuffer(cl_context, cl_bitfield, size_t, void *, cl_int *);
cl_int clReleaseMemObject(cl_mem);
void *clSVMAlloc(cl_context, cl_bitfield, size_t, cl_uint);
void clSVMFree(cl_context, void *);
cl_int clEnqueueFillBuffer(cl_command_queue, cl_mem, const void *, size_t, size_t, size_t,
                           cl_uint, const cl_event *, cl_event *);
cl_int clEnqueueSVMMemFill(cl_command_queue, void *, const void *, size_t, size_t, cl_uint,
                           const cl_event *, cl_event *);
cl_int clEnqueueReadBuffer(cl_command_queue, cl_mem, cl_uint, size_t, size_t, void *, cl_uint,
                           const cl_event *, cl_event *);
cl_int clEnqueueWriteBuffer(cl_command_queue, cl_mem, cl_uint, size_t, size_t, const void *,
                            cl_uint, const cl_event *, cl_event *);
void *clEnqueueMapBuffer(cl_command_queue, cl_mem, cl_uint, cl_bitfield, size_t, size_t,
                         cl_uint, const cl_event *, cl_event *, cl_int *);
cl_int clEnqueueUnmapMemObject(cl_command_queue, cl_mem, void *, cl_uint, const cl_event *,
                               cl_event *);
cl_int clEnqueueSVMMap(cl_command_queue, cl_uint, cl_bitfield, void *, size_t, cl_uint,
                       const cl_event *, cl_event *);
cl_int clEnqueueSVMUnmap(cl_command_queue, void *, cl_uint, const cl_event *, cl_event *);
cl_int clWaitForEvents(cl_uint, const cl_event *);
cl_int clFinish(cl_command_queue);
/*@ cl_errors @*/
static const char *cl_error_name(long long code)
{
    static const struct { int code; const char *name; } names[] = {
        {0, "CL_SUCCESS"}, {-1, "CL_DEVICE_NOT_FOUND"}, {-2, "CL_DEVICE_NOT_AVAILABLE"},
        {-4, "CL_MEM_OBJECT_ALLOCATION_FAILURE"}, {-5, "CL_OUT_OF_RESOURCES"},
        {-6, "CL_OUT_OF_HOST_MEMORY"}, {-11, "CL_BUILD_PROGRAM_FAILURE"}, {-12, "CL_MAP_FAILURE"},
        {-14, "CL_EXEC_STATUS_ERROR_FOR_EVENTS_IN_WAIT_LIST"}, {-30, "CL_INVALID_VALUE"},
        {-33, "CL_INVALID_DEVICE"}, {-34, "CL_INVALID_CONTEXT"}, {-36, "CL_INVALID_COMMAND_QUEUE"},
        {-37, "CL_INVALID_HOST_PTR"}, {-38, "CL_INVALID_MEM_OBJECT"},
        {-46, "CL_INVALID_KERNEL_NAME"}, {-48, "CL_INVALID_KERNEL"}, {-49, "CL_INVALID_ARG_INDEX"},
        {-50, "CL_INVALID_ARG_VALUE"}, {-51, "CL_INVALID_ARG_SIZE"},
        {-52, "CL_INVALID_KERNEL_ARGS"}, {-54, "CL_INVALID_WORK_GROUP_SIZE"},
        {-58, "CL_INVALID_EVENT"}, {-59, "CL_INVALID_OPERATION"}, {-61, "CL_INVALID_BUFFER_SIZE"},
        {-63, "CL_INVALID_GLOBAL_WORK_SIZE"},
    };
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        if (names[i].code == code)
            return names[i].name;
    return "an OpenCL error";
}
/*@ chacha @*/
/* The data generator of clhip (src/generate.rs): RFC 8439 ChaCha20 with a zero nonce and the
   block counter from 0, keyed by seed (8 bytes, little-endian) | stream tag (8 bytes) |
   "clhip/generate/1". Values come from the keystream's 32-bit words in order. */
struct stream { uint32_t key[8], block[16], counter, used; };

static uint32_t rotl(uint32_t x, int r) { return (x << r) | (x >> (32 - r)); }

static void quarter(uint32_t *x, int a, int b, int c, int d)
{
    x[a] += x[b]; x[d] = rotl(x[d] ^ x[a], 16);
    x[c] += x[d]; x[b] = rotl(x[b] ^ x[c], 12);
    x[a] += x[b]; x[d] = rotl(x[d] ^ x[a], 8);
    x[c] += x[d]; x[b] = rotl(x[b] ^ x[c], 7);
}

static uint32_t next_word(struct stream *s)
{
    if (s->used == 16) {
        uint32_t in[16] = {0x61707865, 0x3320646e, 0x79622d32, 0x6b206574}, x[16];
        memcpy(in + 4, s->key, 32);
        in[12] = s->counter++; /* in[13..15]: the zero nonce */
        memcpy(x, in, sizeof x);
        for (int round = 0; round < 10; round++) {
            quarter(x, 0, 4, 8, 12); quarter(x, 1, 5, 9, 13);
            quarter(x, 2, 6, 10, 14); quarter(x, 3, 7, 11, 15);
            quarter(x, 0, 5, 10, 15); quarter(x, 1, 6, 11, 12);
            quarter(x, 2, 7, 8, 13); quarter(x, 3, 4, 9, 14);
        }
        for (int i = 0; i < 16; i++)
            s->block[i] = x[i] + in[i];
        s->used = 0;
    }
    return s->block[s->used++];
}

static struct stream stream_of(uint64_t seed, const char tag[8])
{
    uint8_t k[32];
    struct stream s = {.used = 16};
    for (int i = 0; i < 8; i++)
        k[i] = (uint8_t)(seed >> (8 * i));
    memcpy(k + 8, tag, 8);
    memcpy(k + 16, "clhip/generate/1", 16);
    for (int i = 0; i < 8; i++)
        s.key[i] = (uint32_t)k[4 * i] | (uint32_t)k[4 * i + 1] << 8 |
                   (uint32_t)k[4 * i + 2] << 16 | (uint32_t)k[4 * i + 3] << 24;
    return s;
}
/*@ gen_uniform @*/
/* The top 24 bits as a multiple of 2^-24, shifted: exact in float, [-0.5, 0.5). */
static float uniform_half(uint32_t x) { return (float)(x >> 8) * (1.0f / 16777216.0f) - 0.5f; }
/*@ gen_cvec @*/
/* generate::complex_vec(seed, n): re then im of each element, stream "cvec". */
static float *complex_vec(uint64_t seed, size_t n)
{
    struct stream s = stream_of(seed, "cvec\0\0\0\0");
    float *v = malloc(8 * n);
    for (size_t i = 0; i < 2 * n; i++)
        v[i] = uniform_half(next_word(&s));
    return v;
}
/*@ gen_matrix @*/
/* generate::matrix(seed, n, n, n): column-major, stream "mat". */
static float *matrix(uint64_t seed, size_t n)
{
    struct stream s = stream_of(seed, "mat\0\0\0\0\0");
    float *a = malloc(8 * n * n);
    for (size_t i = 0; i < 2 * n * n; i++)
        a[i] = uniform_half(next_word(&s));
    return a;
}
/*@ gen_hpd @*/
/* Multiples of 1/16 in [-0.5, 0.5]: products and their sums are exact in double. */
static float sixteenth(uint32_t x) { return (float)(((uint64_t)x * 17) >> 32) / 16.0f - 0.5f; }

/* B B^H + n I with B's entries sixteenths (generate::hpd_fill): exactly Hermitian, exact in
   float, column-major n x n. The values are clhip's; where a sum is exactly zero its sign may
   differ (clhip's matrix product negates some zeros), which no cpotrf can tell apart. */
static float *hpd_fill(struct stream *s, size_t n)
{
    float *b = malloc(8 * n * n), *a = malloc(8 * n * n);
    for (size_t i = 0; i < 2 * n * n; i++)
        b[i] = sixteenth(next_word(s));
    for (size_t j = 0; j < n; j++)
        for (size_t i = j; i < n; i++) {
            double re = 0, im = 0; /* sum over k of b(i,k) * conj(b(j,k)) */
            for (size_t k = 0; k < n; k++) {
                double ar = b[2 * (i + k * n)], ai = b[2 * (i + k * n) + 1];
                double br = b[2 * (j + k * n)], bi = b[2 * (j + k * n) + 1];
                re += ar * br + ai * bi;
                im += ai * br - ar * bi;
            }
            if (i == j) {
                a[2 * (j + j * n)] = (float)(re + (double)n);
                a[2 * (j + j * n) + 1] = 0.0f;
            } else {
                a[2 * (i + j * n)] = (float)re, a[2 * (i + j * n) + 1] = (float)im;
                a[2 * (j + i * n)] = (float)re, a[2 * (j + i * n) + 1] = -(float)im;
            }
        }
    free(b);
    return a;
}

/* generate::hpd_matrix(seed, n, n): stream "hpd". */
static float *hpd_matrix(uint64_t seed, size_t n)
{
    struct stream s = stream_of(seed, "hpd\0\0\0\0\0");
    return hpd_fill(&s, n);
}

/* generate::non_hpd_matrix(seed, n, n): an HPD matrix with diagonal entry k negated, k drawn
   after it (stream "nonhpd"); cpotrf must stop at info = k + 1. */
static float *non_hpd_matrix(uint64_t seed, size_t n, size_t *info)
{
    struct stream s = stream_of(seed, "nonhpd\0\0");
    float *a = hpd_fill(&s, n);
    size_t k = 0;
    if (n > 1) {
        uint64_t lo = next_word(&s), hi = next_word(&s);
        k = (size_t)(((unsigned __int128)(lo | hi << 32) * n) >> 64);
    }
    a[2 * (k + k * n)] = -a[2 * (k + k * n)];
    a[2 * (k + k * n) + 1] = -a[2 * (k + k * n) + 1];
    *info = k + 1;
    return a;
}
/*@ pattern @*/
/* Word i of the handoff pattern (generate::pattern_word, kernels/pattern.cl). */
static uint32_t pattern_word(uint32_t seed, uint32_t i)
{
    uint32_t x = i * 0x9E3779B1u + seed;
    x ^= x >> 16;
    x *= 0x85EBCA6Bu;
    x ^= x >> 13;
    x *= 0xC2B2AE35u;
    x ^= x >> 16;
    return x;
}
/*@ cl_open @*/
static cl_device_id device;
static cl_context context;
static cl_command_queue queue;
static cl_program program;

/* clhip's label family of a platform (runtimes/opencl.rs `family`). */
static const char *family(const char *platform)
{
    char p[256];
    size_t i = 0;
    for (; platform[i] && i < sizeof p - 1; i++)
        p[i] = (char)(platform[i] >= 'A' && platform[i] <= 'Z' ? platform[i] + 32 : platform[i]);
    p[i] = 0;
    if (strstr(p, "portable computing language") || strstr(p, "pocl")) return "pocl";
    if (strstr(p, "nvidia")) return "nvidia";
    if (strstr(p, "amd")) return "rocm";
    if (strstr(p, "rusticl")) return "rusticl";
    if (strstr(p, "clover")) return "clover";
    if (strstr(p, "intel")) return "intel";
    return "cl";
}

/* The device clhip labels CL_FAMILY CL_INDEX (the CL_INDEX-th device of that family's
   platforms, in enumeration order), its context, in-order queue and program. */
static void cl_open(void)
{
    cl_platform_id platforms[16];
    cl_uint np = 0, seen = 0;
    cl_int err;
    CHECK(CL, clGetPlatformIDs(16, platforms, &np));
    for (cl_uint p = 0; p < np && !device; p++) {
        char name[256] = "";
        cl_device_id ids[16];
        cl_uint nd = 0;
        clGetPlatformInfo(platforms[p], CL_PLATFORM_NAME, sizeof name, name, NULL);
        if (strcmp(family(name), CL_FAMILY) != 0 ||
            clGetDeviceIDs(platforms[p], CL_DEVICE_TYPE_ALL, 16, ids, &nd) != CL_SUCCESS)
            continue;
        for (cl_uint d = 0; d < nd && !device; d++, seen++)
            if (seen == CL_INDEX)
                device = ids[d];
    }
    if (!device) {
        fprintf(stderr, "no OpenCL device %s%d on this machine\n", CL_FAMILY, CL_INDEX);
        exit(2);
    }
    CHECK(CL, (context = clCreateContext(NULL, 1, &device, NULL, NULL, &err), err));
    CHECK(CL, (queue = clCreateCommandQueue(context, device, 0, &err), err));
    CHECK(CL, (program = clCreateProgramWithSource(context, 1, &CL_SOURCE, NULL, &err), err));
    if (clBuildProgram(program, 1, &device, "", NULL, NULL) != CL_SUCCESS) {
        static char log[8192];
        clGetProgramBuildInfo(program, device, CL_PROGRAM_BUILD_LOG, sizeof log, log, NULL);
        fprintf(stderr, "clBuildProgram failed:\n%s\n", log);
        exit(2);
    }
}
/*@ cl_launch @*/
static const uint32_t POISON = 0x7FF4DEADu; /* what new memory holds first (paths.rs) */

/* A kernel argument: a buffer object, an SVM (or raw device) pointer, or a scalar. */
struct arg { int kind; cl_mem mem; void *svm; cl_uint u32; float f32; };
static struct arg mem(cl_mem m) { return (struct arg){.kind = 0, .mem = m}; }
static struct arg svm(void *p) { return (struct arg){.kind = 1, .svm = p}; }
static struct arg u32(cl_uint v) { return (struct arg){.kind = 2, .u32 = v}; }

/* A 1-D launch as clhip's (runtimes/opencl.rs `launch`): a fresh kernel object, the
   work-group size the largest power of two within 256, the device's and the kernel's limits
   and the global size, which is rounded up to it (every kernel bounds-checks its index). */
static cl_event launch(const char *name, size_t global, int nargs, const struct arg *args,
                       cl_uint nwait, const cl_event *wait)
{
    cl_int err;
    cl_kernel k;
    cl_event ev;
    size_t dev_wg = 1, kernel_wg = 1, local = 1;
    CHECK(CL, (k = clCreateKernel(program, name, &err), err));
    for (cl_uint i = 0; i < (cl_uint)nargs; i++) {
        const struct arg *a = &args[i];
        if (a->kind == 0) CHECK(CL, clSetKernelArg(k, i, sizeof(cl_mem), &a->mem));
        if (a->kind == 1) CHECK(CL, clSetKernelArgSVMPointer(k, i, a->svm));
        if (a->kind == 2) CHECK(CL, clSetKernelArg(k, i, sizeof(cl_uint), &a->u32));
        if (a->kind == 3) CHECK(CL, clSetKernelArg(k, i, sizeof(float), &a->f32));
    }
    CHECK(CL, clGetDeviceInfo(device, CL_DEVICE_MAX_WORK_GROUP_SIZE, sizeof dev_wg, &dev_wg, NULL));
    CHECK(CL, clGetKernelWorkGroupInfo(k, device, CL_KERNEL_WORK_GROUP_SIZE, sizeof kernel_wg,
                                       &kernel_wg, NULL));
    size_t cap = dev_wg < kernel_wg ? dev_wg : kernel_wg;
    cap = cap > 256 ? 256 : cap < 1 ? 1 : cap;
    while (local * 2 <= cap && local < global)
        local *= 2;
    global = (global + local - 1) / local * local;
    CHECK(CL, clEnqueueNDRangeKernel(queue, k, 1, NULL, &global, &local, nwait, nwait ? wait : NULL,
                                     &ev));
    clReleaseKernel(k);
    return ev;
}

/* A plain buffer, not under test, filled with the poison word as clhip's DeviceBuffer is. */
static cl_mem device_buffer(size_t bytes)
{
    cl_int err;
    cl_mem b;
    uint32_t poison = POISON;
    bytes = bytes < 4 ? 4 : bytes;
    CHECK(CL, (b = clCreateBuffer(context, CL_MEM_READ_WRITE, bytes, NULL, &err), err));
    CHECK(CL, clEnqueueFillBuffer(queue, b, &poison, 4, 0, bytes, 0, NULL, NULL));
    return b;
}
/*@ pi @*/
static const double PI = 3.14159265358979323846;
/*@ fft_cl @*/
/* clhip's OpenCL FFT (src/fft.rs): Stockham passes out of place, ping-ponging between the data
   and a scratch buffer, twiddles exp(-2 pi i r k / (ns R)) computed in double, rounded to
   float. FFT_PASSES is clhip's plan for this size. */
static cl_event fft_forward(struct arg data, size_t n, cl_uint nwait, const cl_event *wait)
{
    cl_int err;
    cl_mem scratch, table;
    float *tw = malloc(8 * (FFT_TWIDDLES > 0 ? FFT_TWIDDLES : 1));
    size_t t = 0;
    for (int p = 0; p < FFT_NPASSES; p++)
        for (unsigned r = 1; r < FFT_PASSES[p].radix; r++)
            for (unsigned k = 0; k < FFT_PASSES[p].ns; k++, t++) {
                double a = -2.0 * PI * (double)(r * k) / (double)(FFT_PASSES[p].ns * FFT_PASSES[p].radix);
                tw[2 * t] = (float)cos(a), tw[2 * t + 1] = (float)sin(a);
            }
    CHECK(CL, (scratch = clCreateBuffer(context, CL_MEM_READ_WRITE, 8 * n, NULL, &err), err));
    CHECK(CL, (table = clCreateBuffer(context, CL_MEM_READ_ONLY | CL_MEM_COPY_HOST_PTR,
                                      8 * FFT_TWIDDLES, tw, &err), err));
    struct arg src = data, dst = mem(scratch);
    cl_event last = NULL;
    for (int p = 0; p < FFT_NPASSES; p++) {
        static const char *kernels[] = {"", "", "fft_radix2", "", "fft_radix4", "", "", "", "fft_radix8"};
        struct arg args[] = {src, dst, mem(table), u32(FFT_PASSES[p].tw_off), u32((cl_uint)n),
                             u32(FFT_PASSES[p].ns)};
        last = last ? launch(kernels[FFT_PASSES[p].radix], n / FFT_PASSES[p].radix, 6, args, 1, &last)
                    : launch(kernels[FFT_PASSES[p].radix], n / FFT_PASSES[p].radix, 6, args, nwait, wait);
        struct arg swap = src;
        src = dst, dst = swap;
    }
    if (FFT_NPASSES % 2 == 1) /* the last pass wrote scratch: copy the result back */
        last = launch("ccopy", n, 3, (struct arg[]){src, data, u32((cl_uint)n)}, 1, &last);
    clReleaseMemObject(scratch);
    clReleaseMemObject(table);
    free(tw);
    return last;
}
/*@ ref_fft @*/
/* The f64 reference: X[k] = sum_j x[j] exp(-2 pi i jk/N), radix-2 in double. */
static double *reference_fft(const double *x, size_t n)
{
    double *y = malloc(16 * n);
    for (size_t i = 0, j = 0; i < n; i++) {
        y[2 * j] = x[2 * i], y[2 * j + 1] = x[2 * i + 1];
        size_t bit = n >> 1; /* j = bit-reverse(i + 1) */
        for (; bit && (j & bit); bit >>= 1)
            j ^= bit;
        j |= bit;
    }
    for (size_t len = 2; len <= n; len <<= 1)
        for (size_t k = 0; k < len / 2; k++) {
            double a = -2.0 * PI * (double)k / (double)len, wr = cos(a), wi = sin(a);
            for (size_t s = 0; s < n; s += len) {
                double *u = y + 2 * (s + k), *v = y + 2 * (s + k + len / 2);
                double tr = v[0] * wr - v[1] * wi, ti = v[0] * wi + v[1] * wr;
                v[0] = u[0] - tr, v[1] = u[1] - ti;
                u[0] += tr, u[1] += ti;
            }
        }
    return y;
}
/*@ check_fft @*/
/* clhip's FFT bound (tolerance.rs check_fft, rocFFT clients shared/accuracy_test.h):
     Linf: max(|dre|,|dim|) <= eps_p * ||ref||_inf * max(ln N, 1) per element, and
     L2:   ||got - ref||_2 / ||ref||_2 <= sqrt(max(log2 N, 1)) * eps_p,   eps_p = 3.75e-5. */
static int check_fft(const char *what, const float *got, const double *want, size_t n)
{
    double ref_inf = 0, ref2 = 0, d2 = 0;
    for (size_t i = 0; i < 2 * n; i++)
        ref_inf = fmax(ref_inf, fabs(want[i])), ref2 += want[i] * want[i];
    double linf_bound = 3.75e-5 * ref_inf * fmax(log((double)n), 1.0);
    double l2_bound = 3.75e-5 * sqrt(fmax(log2((double)n), 1.0));
    size_t bad = 0, first = 0;
    for (size_t i = 0; i < n; i++) {
        double dr = got[2 * i] - want[2 * i], di = got[2 * i + 1] - want[2 * i + 1];
        double e = isnan(dr) || isnan(di) ? NAN : fmax(fabs(dr), fabs(di));
        if (!(e <= linf_bound) && bad++ == 0)
            first = i;
        d2 += isfinite(e) ? dr * dr + di * di : e;
    }
    double l2 = sqrt(d2) / sqrt(ref2);
    printf("%s: Linf bound %.4e, L2 %.3e (bound %.3e)\n", what, linf_bound, l2, l2_bound);
    if (bad) {
        printf("FAIL: %zu of %zu elements out of the Linf bound, first at [%zu]: got (%.8e, %.8e) "
               "want (%.8e, %.8e)\n", bad, n, first, got[2 * first], got[2 * first + 1],
               want[2 * first], want[2 * first + 1]);
        return 1;
    }
    if (!(l2 <= l2_bound)) {
        printf("FAIL: the L2 criterion: %.3e > %.3e\n", l2, l2_bound);
        return 1;
    }
    return 0;
}
/*@ check_pipeline @*/
/* clhip's pipeline bound (tolerance.rs check_pipeline; ours, from rocFFT clients'):
     |got_i - ref_i| <= |scale| * sqrt(2) * B_fft + 4 * eps32 * |ref_i|,
     B_fft = eps_p * ||FFT(a + b)||_inf * max(ln N, 1), eps_p = 3.75e-5, eps32 = 2^-23. */
static int check_pipeline(const char *what, const float *got, const double *fft, float scale,
                          size_t n)
{
    double inf = 0;
    for (size_t i = 0; i < 2 * n; i++)
        inf = fmax(inf, fabs(fft[i]));
    double abs_term = fabs(scale) * sqrt(2.0) * 3.75e-5 * inf * fmax(log((double)n), 1.0);
    size_t bad = 0, first = 0;
    double first_want = 0;
    for (size_t i = 0; i < n; i++) {
        double want = hypot(scale * fft[2 * i], scale * fft[2 * i + 1]);
        /* the magnitude stage writes (|x|, 0): a non-zero imaginary part is wrong data too */
        double g = got[2 * i + 1] == 0.0f ? got[2 * i] : NAN;
        if (!(fabs(g - want) <= abs_term + 4 * 0x1p-23 * want) && bad++ == 0)
            first = i, first_want = want;
    }
    printf("%s: bound %.4e + 4 eps32 |ref|\n", what, abs_term);
    if (bad) {
        printf("FAIL: %zu of %zu magnitudes out of bound, first at [%zu]: got (%.8e, %.8e) want "
               "(%.8e, 0)\n", bad, n, first, got[2 * first], got[2 * first + 1], first_want);
        return 1;
    }
    return 0;
}
/*@ check_gemm @*/
/* clhip's cgemm bound (tolerance.rs check_cgemm, rocBLAS clients sum_error_tolerance):
     |dre|, |dim| <= max(K, 1) * 1e-4 * sqrt(0.5) per element of C, against the f64 product. */
static int check_gemm(const char *what, const float *got, const float *a, const float *b,
                      const float *c, double ar, double ai, double br, double bi, size_t n)
{
    double bound = (double)(n > 1 ? n : 1) * 1e-4 * sqrt(0.5);
    size_t bad = 0, first = 0;
    double first_want[2] = {0, 0};
    for (size_t j = 0; j < n; j++)
        for (size_t i = 0; i < n; i++) {
            double sr = 0, si = 0;
            for (size_t k = 0; k < n; k++) {
                double xr = a[2 * (i + k * n)], xi = a[2 * (i + k * n) + 1];
                double yr = b[2 * (k + j * n)], yi = b[2 * (k + j * n) + 1];
                sr += xr * yr - xi * yi, si += xr * yi + xi * yr;
            }
            size_t p = i + j * n;
            double cr = c[2 * p], ci = c[2 * p + 1];
            double wr = ar * sr - ai * si + br * cr - bi * ci;
            double wi = ar * si + ai * sr + br * ci + bi * cr;
            double e = fmax(fabs(got[2 * p] - wr), fabs(got[2 * p + 1] - wi));
            if (isnan(got[2 * p]) || isnan(got[2 * p + 1]) || !(e <= bound))
                if (bad++ == 0)
                    first = p, first_want[0] = wr, first_want[1] = wi;
        }
    printf("%s: bound %.4e per component\n", what, bound);
    if (bad) {
        printf("FAIL: %zu of %zu elements out of bound, first at [%zu] (row %zu, column %zu): got "
               "(%.8e, %.8e) want (%.8e, %.8e)\n", bad, n * n, first, first % n, first / n,
               got[2 * first], got[2 * first + 1], first_want[0], first_want[1]);
        return 1;
    }
    return 0;
}
/*@ check_cholesky @*/
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
        d = sqrt(d);
        l[2 * (j + j * n)] = d;
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
    if (!(rel <= bound)) {
        printf("FAIL: the factor is out of bound; its largest error is at [%zu] (row %zu, column "
               "%zu): got (%.8e, %.8e) want (%.8e, %.8e)\n", at, at % n, at / n, got[2 * at],
               got[2 * at + 1], want[2 * at], want[2 * at + 1]);
        return 1;
    }
    return 0;
}
/*@ poison @*/
/* len complex elements of the poison word: a quiet NaN that fails every check. */
static float *poison_vec(size_t len)
{
    uint32_t *v = malloc(8 * len);
    for (size_t i = 0; i < 2 * len; i++)
        v[i] = POISON;
    return (float *)v;
}
/*@ cl_buffers @*/
static void write_buffer(cl_mem b, const void *data, size_t bytes)
{
    CHECK(CL, clEnqueueWriteBuffer(queue, b, CL_TRUE, 0, bytes, data, 0, NULL, NULL));
}

static void read_buffer(cl_mem b, void *data, size_t bytes)
{
    CHECK(CL, clEnqueueReadBuffer(queue, b, CL_TRUE, 0, bytes, data, 0, NULL, NULL));
}

/*@ svm_alloc @*/
/* clhip checks the device's SVM capabilities before clSVMAlloc (paths.rs svm_alloc). */
static void *svm_alloc(int fine, size_t bytes)
{
    cl_bitfield caps = 0;
    CHECK(CL, clGetDeviceInfo(device, CL_DEVICE_SVM_CAPABILITIES, sizeof caps, &caps, NULL));
    if (!(caps & (fine ? 2 : 1))) {
        printf("UNSUPPORTED: the device lacks %s buffer SVM (capabilities 0x%llx)\n",
               fine ? "fine-grain" : "coarse-grain", (unsigned long long)caps);
        exit(2);
    }
    void *p = clSVMAlloc(context, CL_MEM_READ_WRITE | (fine ? CL_MEM_SVM_FINE_GRAIN_BUFFER : 0),
                         bytes, 0);
    if (!p) {
        printf("ERROR: clSVMAlloc(%zu bytes) returned NULL\n", bytes);
        exit(2);
    }
    return p;
}
/*@ map_check @*/
/* OpenCL 1.2 5.4.2: mapping a CL_MEM_USE_HOST_PTR buffer gives the host pointer back, else the
   peer would work on a copy it was never told about (sync.rs map_host_ptr). */
static void check_mapped(void *mapped, uint64_t host)
{
    if (mapped != (void *)(uintptr_t)host) {
        printf("FAIL: clEnqueueMapBuffer mapped %p, not the USE_HOST_PTR address %p\n", mapped,
               (void *)(uintptr_t)host);
        exit(1);
    }
}
/*@ cl_pattern @*/
/* OpenCL's bit-exact check (kernels/pattern.cl): pattern_check counts the mismatches into
   result[0], keeps the first index in result[1] and writes its ran-marker to result[2];
   pattern_observe puts the word seen there in result[3]; with rewrite, pattern_fill then writes
   the next seed's pattern over the memory. Returns the last event. */
static cl_event cl_check_pattern(struct arg m, uint32_t seed, cl_uint words, cl_mem result,
                                 int rewrite, uint32_t next, cl_uint nwait, const cl_event *wait)
{
    cl_event checked = launch("pattern_check", words, 4,
                              (struct arg[]){m, u32(seed), u32(words), mem(result)}, nwait, wait);
    cl_event last = launch("pattern_observe", 1, 3, (struct arg[]){m, u32(words), mem(result)},
                           1, &checked);
    if (rewrite)
        last = launch("pattern_fill", words, 3, (struct arg[]){m, u32(next), u32(words)}, 1, &last);
    return last;
}

/* The verdict of OpenCL's check from its result words, read after the case's steps. */
static int cl_pattern_verdict(const char *what, const uint32_t *r, uint32_t seed, cl_uint words)
{
    if (r[2] != words) {
        printf("FAIL: %s: OpenCL's check kernel did not run (ran-marker %u, want %u)\n", what, r[2],
               words);
        return 1;
    }
    if (r[0] == 0) {
        printf("%s: %u words bit-exact\n", what, words);
        return 0;
    }
    printf("FAIL: %s: %u of %u words differ (bit-exact), first at [%u]: got 0x%08x want 0x%08x\n",
           what, r[0], words, r[1], r[3], pattern_word(seed, r[1]));
    return 1;
}
/*@ host_alloc @*/
/* Page-aligned, zeroed host memory (runtimes/host.rs alloc_pageable): the host peer's own, and
   every peer's staging memory on the copy path. */
static uint64_t host_alloc(size_t len)
{
    size_t bytes = (8 * (len ? len : 1) + 4095) / 4096 * 4096;
    void *p = aligned_alloc(4096, bytes);
    memset(p, 0, bytes);
    return (uint64_t)(uintptr_t)p;
}
/*@ end @*/
