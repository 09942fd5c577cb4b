/*@ includes @*/
#define CL_TARGET_OPENCL_VERSION 300
#define CL_USE_DEPRECATED_OPENCL_1_2_APIS /* clCreateCommandQueue, as clhip calls it */
#include <CL/cl.h>
/*@ std_includes @*/
#include <ctype.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
/*@ cl_errors @*/
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
/*@ chacha @*/
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
/*@ gen_cvec @*/
/* generate::complex_vec(seed, n): re then im of each element from stream "cvec", each the top
   24 bits of a word as a multiple of 2^-24, shifted: exact in float, in [-0.5, 0.5). */
static float *complex_vec(uint64_t seed, size_t n)
{
    struct stream s = stream_of(seed, "cvec\0\0\0\0");
    float *v = malloc(8 * n);
    for (size_t i = 0; i < 2 * n; i++)
        v[i] = (float)(next_word(&s) >> 8) * (1.0f / 16777216.0f) - 0.5f;
    return v;
}
/*@ gen_matrix @*/
/* generate::matrix(seed, n, n, n): column-major from stream "mat", each value the top 24 bits
   of a word as a multiple of 2^-24, shifted: exact in float, in [-0.5, 0.5). */
static float *matrix(uint64_t seed, size_t n)
{
    struct stream s = stream_of(seed, "mat\0\0\0\0\0");
    float *a = malloc(8 * n * n);
    for (size_t i = 0; i < 2 * n * n; i++)
        a[i] = (float)(next_word(&s) >> 8) * (1.0f / 16777216.0f) - 0.5f;
    return a;
}
/*@ hpd_from @*/
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
/*@ gen_hpd @*/
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
/*@ simple_ones @*/
/* The input: every element (1, 0) (generate::DataKind::Ones). */
static float *values(uint64_t seed, size_t len)
{
    float *v = calloc(len, 8);
    (void)seed;
    for (size_t i = 0; i < len; i++)
        v[2 * i] = 1.0f;
    return v;
}
/*@ simple_impulse @*/
/* The input: element 0 is (1, 0), every other (0, 0) (generate::DataKind::Impulse). */
static float *values(uint64_t seed, size_t len)
{
    float *v = calloc(len, 8);
    (void)seed;
    v[0] = 1.0f;
    return v;
}
/*@ simple_integers @*/
/* The input: element i is ((i + seed % 8) % 5 - 2, (2 i + seed % 8) % 7 - 3)
   (generate::DataKind::SmallIntegers). */
static float *values(uint64_t seed, size_t len)
{
    float *v = malloc(8 * len);
    for (size_t i = 0; i < len; i++)
        v[2 * i] = (float)((i + seed % 8) % 5) - 2.0f, v[2 * i + 1] = (float)((2 * i + seed % 8) % 7) - 3.0f;
    return v;
}
/*@ simple_cvec @*/
static float *complex_vec(uint64_t seed, size_t n) { return values(seed, n); }
/*@ simple_matrix @*/
static float *matrix(uint64_t seed, size_t n) { return values(seed, n * n); }
/*@ simple_hpd @*/
static float *hpd_matrix(uint64_t seed, size_t n) { return hpd_from(values(seed, n * n), n); }

/* hpd_matrix with diagonal entry n / 2 negated: cpotrf must stop at info = n / 2 + 1. */
static float *non_hpd_matrix(uint64_t seed, size_t n, size_t *info)
{
    float *a = hpd_matrix(seed, n);
    size_t k = n / 2;
    a[2 * (k + k * n)] = -a[2 * (k + k * n)], a[2 * (k + k * n) + 1] = -a[2 * (k + k * n) + 1];
    *info = k + 1;
    return a;
}
/*@ pattern @*/
/* Word i of the handoff pattern (generate::pattern_word, kernels/pattern.cl). */
static uint32_t pattern_word(uint32_t seed, uint32_t i)
{
    uint32_t x = i * 0x9E3779B1u + seed;
    x = (x ^ x >> 16) * 0x85EBCA6Bu;
    x = (x ^ x >> 13) * 0xC2B2AE35u;
    return x ^ x >> 16;
}
/*@ crossing_seed @*/
/* The pattern seed of the reuse op's crossing k (ops/reuse.rs crossing_seed): a bijection of k
   for one data seed, so that memory still holding an earlier crossing's pattern never passes
   for this one's. */
static uint32_t crossing_seed(uint64_t seed, uint32_t k)
{
    return pattern_word((uint32_t)(seed ^ seed >> 32) ^ 0x2E05E5EDu, k);
}
/*@ cl_open @*/
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
/*@ cl_launch @*/
/* A kernel argument: a buffer, an SVM (or raw device) pointer, or a uint. */
struct arg { int kind; cl_mem mem; void *svm; cl_uint u32; };
static struct arg mem(cl_mem m) { return (struct arg){.kind = 0, .mem = m}; }
static struct arg svm(void *p) { return (struct arg){.kind = 1, .svm = p}; }
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
/*@ device_buffer @*/
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
/*@ poison @*/
/* len complex elements of the poison word: a quiet NaN that fails every check. */
static float *poison_vec(size_t len)
{
    uint32_t *v = malloc(8 * len);
    for (size_t i = 0; i < 2 * len; i++)
        v[i] = POISON;
    return (float *)v;
}
/*@ fft_cl @*/
/* clhip's OpenCL FFT (src/fft.rs): the passes of FFT_PASSES out of place, back and forth
   between the data and a scratch buffer, with twiddles exp(-2 pi i r k / (ns R)) computed in
   double and rounded to float. */
static cl_event fft_forward(struct arg data, size_t n, cl_uint nwait, const cl_event *wait)
{
    static const char *kernels[] = {[2] = "fft_radix2", [4] = "fft_radix4", [8] = "fft_radix8"};
    float *tw = malloc(8 * FFT_TWIDDLES);
    size_t t = 0;
    cl_int err;
    cl_mem scratch, table;
    for (int p = 0; p < FFT_NPASSES; p++)
        for (unsigned r = 1; r < FFT_PASSES[p].radix; r++)
            for (unsigned k = 0; k < FFT_PASSES[p].ns; k++, t++) {
                double a = -2.0 * M_PI * (double)(r * k) / (double)(FFT_PASSES[p].ns * FFT_PASSES[p].radix);
                tw[2 * t] = (float)cos(a), tw[2 * t + 1] = (float)sin(a);
            }
    call_scope = "fft-plan"; /* clhip makes these once per size */
    CHECK(CL, (scratch = clCreateBuffer(context, CL_MEM_READ_WRITE, 8 * n, NULL, &err), err));
    CHECK(CL, (table = clCreateBuffer(context, CL_MEM_READ_ONLY | CL_MEM_COPY_HOST_PTR, 8 * FFT_TWIDDLES, tw, &err), err));
    call_scope = NULL;
    struct arg src = data, dst = mem(scratch), swap;
    cl_event last = NULL;
    for (int p = 0; p < FFT_NPASSES; p++) {
        struct arg args[] = {src, dst, mem(table), u32(FFT_PASSES[p].tw_off), u32((cl_uint)n), u32(FFT_PASSES[p].ns)};
        last = launch(kernels[FFT_PASSES[p].radix], n / FFT_PASSES[p].radix, 6, args, p ? 1 : nwait, p ? &last : wait);
        swap = src, src = dst, dst = swap;
    }
    if (FFT_NPASSES % 2 == 1) /* the last pass wrote scratch: copy the result back */
        last = launch("ccopy", n, 3, (struct arg[]){src, data, u32((cl_uint)n)}, 1, &last);
    clReleaseMemObject(scratch);
    clReleaseMemObject(table);
    return last;
}
/*@ ref_fft @*/
/* The f64 reference: X[k] = sum_j x[j] exp(-2 pi i jk/N), radix-2 in double, of x = a (+ b). */
static double *reference_fft(const float *a, const float *b, size_t n)
{
    double *y = malloc(16 * n);
    for (size_t i = 0, j = 0, bit; i < n; i++, j |= bit) { /* y[bit-reverse(i)] = x[i] */
        y[2 * j] = (double)a[2 * i] + (b ? (double)b[2 * i] : 0.0);
        y[2 * j + 1] = (double)a[2 * i + 1] + (b ? (double)b[2 * i + 1] : 0.0);
        for (bit = n >> 1; bit && (j & bit); bit >>= 1)
            j ^= bit;
    }
    for (size_t len = 2; len <= n; len <<= 1)
        for (size_t k = 0; k < len / 2; k++) {
            double a = -2.0 * M_PI * (double)k / (double)len, wr = cos(a), wi = sin(a);
            for (double *u = y + 2 * k, *v = u + len; u < y + 2 * n; u += 2 * len, v += 2 * len) {
                double tr = v[0] * wr - v[1] * wi, ti = v[0] * wi + v[1] * wr;
                v[0] = u[0] - tr, v[1] = u[1] - ti, u[0] += tr, u[1] += ti;
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
    size_t bad = 0, first = 0;
    for (size_t i = 0; i < 2 * n; i++)
        ref_inf = fmax(ref_inf, fabs(want[i])), ref2 += want[i] * want[i];
    double linf_bound = 3.75e-5 * ref_inf * fmax(log((double)n), 1.0);
    double l2_bound = 3.75e-5 * sqrt(fmax(log2((double)n), 1.0));
    for (size_t i = 0; i < n; i++) {
        double dr = got[2 * i] - want[2 * i], di = got[2 * i + 1] - want[2 * i + 1];
        double e = isnan(dr) || isnan(di) ? NAN : fmax(fabs(dr), fabs(di));
        if (!(e <= linf_bound) && bad++ == 0)
            first = i;
        d2 += isfinite(e) ? dr * dr + di * di : e;
    }
    double l2 = sqrt(d2) / sqrt(ref2);
    printf("%s: Linf bound %.4e, L2 %.3e (bound %.3e)\n", what, linf_bound, l2, l2_bound);
    if (bad)
        printf("FAIL: %zu of %zu elements out of the Linf bound, first at [%zu]: got (%.8e, %.8e) "
               "want (%.8e, %.8e)\n", bad, n, first, got[2 * first], got[2 * first + 1],
               want[2 * first], want[2 * first + 1]);
    else if (!(l2 <= l2_bound))
        printf("FAIL: the L2 criterion: %.3e > %.3e\n", l2, l2_bound);
    return bad || !(l2 <= l2_bound);
}
/*@ check_pipeline @*/
/* clhip's pipeline bound (tolerance.rs check_pipeline; ours, from rocFFT clients'):
     |got_i - ref_i| <= |scale| * sqrt(2) * B_fft + 4 * eps32 * |ref_i|,
     B_fft = eps_p * ||FFT(a + b)||_inf * max(ln N, 1), eps_p = 3.75e-5, eps32 = 2^-23. */
static int check_pipeline(const char *what, const float *got, const double *fft, float scale,
                          size_t n)
{
    double inf = 0, first_want = 0;
    size_t bad = 0, first = 0;
    for (size_t i = 0; i < 2 * n; i++)
        inf = fmax(inf, fabs(fft[i]));
    double abs_term = fabs(scale) * sqrt(2.0) * 3.75e-5 * inf * fmax(log((double)n), 1.0);
    for (size_t i = 0; i < n; i++) {
        double want = hypot(scale * fft[2 * i], scale * fft[2 * i + 1]);
        /* the magnitude stage writes (|x|, 0): a non-zero imaginary part is wrong data too */
        double g = got[2 * i + 1] == 0.0f ? got[2 * i] : NAN;
        if (!(fabs(g - want) <= abs_term + 4 * 0x1p-23 * want) && bad++ == 0)
            first = i, first_want = want;
    }
    printf("%s: bound %.4e + 4 eps32 |ref|\n", what, abs_term);
    if (bad)
        printf("FAIL: %zu of %zu magnitudes out of bound, first at [%zu]: got (%.8e, %.8e) want "
               "(%.8e, 0)\n", bad, n, first, got[2 * first], got[2 * first + 1], first_want);
    return bad != 0;
}
/*@ check_gemm @*/
/* clhip's cgemm bound (tolerance.rs check_cgemm, rocBLAS clients sum_error_tolerance):
     |dre|, |dim| <= max(K, 1) * 1e-4 * sqrt(0.5) per element of C, against the f64
     A B + beta C (alpha = 1). */
static int check_gemm(const char *what, const float *got, const float *a, const float *b,
                      const float *c, const double beta[2], size_t n)
{
    double bound = (double)(n > 1 ? n : 1) * 1e-4 * sqrt(0.5), want[2], first_want[2] = {0, 0};
    size_t bad = 0, first = 0;
    for (size_t p = 0; p < n * n; p++) {
        size_t i = p % n, j = p / n;
        double sr = 0, si = 0;
        for (size_t k = 0; k < n; k++) {
            double xr = a[2 * (i + k * n)], xi = a[2 * (i + k * n) + 1];
            double yr = b[2 * (k + j * n)], yi = b[2 * (k + j * n) + 1];
            sr += xr * yr - xi * yi, si += xr * yi + xi * yr;
        }
        want[0] = sr + beta[0] * c[2 * p] - beta[1] * c[2 * p + 1];
        want[1] = si + beta[0] * c[2 * p + 1] + beta[1] * c[2 * p];
        double e = fmax(fabs(got[2 * p] - want[0]), fabs(got[2 * p + 1] - want[1]));
        if ((isnan(got[2 * p]) || isnan(got[2 * p + 1]) || !(e <= bound)) && bad++ == 0)
            first = p, first_want[0] = want[0], first_want[1] = want[1];
    }
    printf("%s: bound %.4e per component\n", what, bound);
    if (bad)
        printf("FAIL: %zu of %zu elements out of bound, first at [%zu] (row %zu, column %zu): got "
               "(%.8e, %.8e) want (%.8e, %.8e)\n", bad, n * n, first, first % n, first / n,
               got[2 * first], got[2 * first + 1], first_want[0], first_want[1]);
    return bad != 0;
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
/*@ check_exact @*/
/* clhip's exact check (tolerance.rs check_exact_c32): every word of got is the word of
   input * factor, bit for bit (doubling is exact in float for these inputs). */
static int check_exact(const char *what, const float *got, const float *input, float factor, size_t n)
{
    size_t bad = 0, first = 0;
    for (size_t i = 0; i < 2 * n; i++) {
        float want = input[i] * factor;
        if (memcmp(&got[i], &want, 4) != 0 && bad++ == 0)
            first = i;
    }
    if (bad)
        printf("FAIL: %s: %zu of %zu floats differ (bit-exact), first at [%zu] (%s of element %zu): "
               "got %.8e want %.8e\n", what, bad, 2 * n, first, first % 2 ? "im" : "re", first / 2,
               got[first], input[first] * factor);
    else
        printf("%s: %zu complex floats bit-exact\n", what, n);
    return bad != 0;
}
/*@ svm_alloc @*/
/* clhip checks the device's SVM capabilities before clSVMAlloc (paths.rs svm_alloc). */
static void *svm_alloc(int fine, size_t bytes)
{
    cl_device_svm_capabilities caps = 0;
    CHECK(CL, clGetDeviceInfo(device, CL_DEVICE_SVM_CAPABILITIES, sizeof caps, &caps, NULL));
    if (!(caps & (fine ? CL_DEVICE_SVM_FINE_GRAIN_BUFFER : CL_DEVICE_SVM_COARSE_GRAIN_BUFFER))) {
        printf("UNSUPPORTED: the device lacks %s buffer SVM (capabilities 0x%llx)\n",
               fine ? "fine-grain" : "coarse-grain", (unsigned long long)caps);
        finish(2);
    }
    void *p = CALL(clSVMAlloc(context, CL_MEM_READ_WRITE | (fine ? CL_MEM_SVM_FINE_GRAIN_BUFFER : 0), bytes, 0));
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
        finish(1);
    }
}
/*@ cl_pattern @*/
/* OpenCL's bit-exact check (kernels/pattern.cl): pattern_check counts the mismatches into
   result[0], keeps the first index in result[1] and writes its ran-marker to result[2];
   pattern_observe puts the word seen there in result[3]. */
static cl_event cl_check_pattern(struct arg m, uint32_t seed, cl_mem result, cl_uint nwait,
                                 const cl_event *wait)
{
    cl_event checked = launch("pattern_check", 2 * N, 4, (struct arg[]){m, u32(seed), u32(2 * N), mem(result)}, nwait, wait);
    return launch("pattern_observe", 1, 3, (struct arg[]){m, u32(2 * N), mem(result)}, 1, &checked);
}

/* cl_check_pattern into slot `slot` of a buffer of 4-word slots (pattern_check_slot): the reuse
   op's checks share one buffer, made and read back once (ops/reuse.rs). */
static cl_event cl_check_pattern_slot(struct arg m, uint32_t seed, cl_mem results, uint32_t slot,
                                      cl_uint nwait, const cl_event *wait)
{
    cl_event checked = launch("pattern_check_slot", 2 * N, 5, (struct arg[]){m, u32(seed), u32(2 * N), mem(results), u32(slot)}, nwait, wait);
    return launch("pattern_observe_slot", 1, 4, (struct arg[]){m, u32(2 * N), mem(results), u32(slot)}, 1, &checked);
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

/* check_written for a buffer of `slots` 4-word slots. */
static void check_written_slots(const char *what, cl_mem results, const uint32_t (*want)[4], size_t slots)
{
    uint32_t (*r)[4] = malloc(slots * sizeof *r);
    CHECK(CL, clEnqueueReadBuffer(queue, results, CL_TRUE, 0, slots * 16, r, 0, NULL, NULL));
    for (size_t k = 0; k < slots; k++)
        if (memcmp(r[k], want[k], 16) != 0)
            printf("FAIL: %s, read back after clEnqueueWriteBuffer: slot %zu holds {0x%08x, 0x%08x, 0x%08x, 0x%08x}, "
                   "not the words written\n", what, k, r[k][0], r[k][1], r[k][2], r[k][3]), finish(1);
    free(r);
}

/* The verdict of OpenCL's check from its result words, read after the case's steps. */
static int cl_pattern_verdict(const char *what, const uint32_t r[4], uint32_t seed)
{
    if (r[2] != 2 * N)
        printf("FAIL: %s: OpenCL's check kernel did not run (ran-marker %u)\n", what, r[2]);
    return r[2] != 2 * N || pattern_verdict(what, (uint64_t[3]){r[0], r[1], r[3]}, seed);
}
/*@ reuse @*/
/* Whether crossing k of the reuse op failed: an even one by the peer's check, an odd one by
   OpenCL's result words, judged as cl_pattern_verdict judges them. */
static int crossing_failed(int k, uint64_t peer_seen[][3], uint32_t cl_words[][4])
{
    if (k % 2 == 0)
        return peer_seen[k / 2][0] != 0;
    return cl_words[k / 2][2] != 2 * N || cl_words[k / 2][0] != 0;
}

/* The reuse op's verdict (ops/reuse.rs) over the `crossed` crossings run: the first failing
   crossing in causal order, in clhip's words, with how many failed and the last, and where the
   case stopped if it stopped early; 1 if any failed. */
static int reuse_verdict(const char *peer, uint64_t peer_seen[][3], uint32_t cl_words[][4], int crossed)
{
    int first = -1, last = -1, failing = 0;
    char note[192], what[320];
    for (int k = 0; k < crossed; k++)
        if (crossing_failed(k, peer_seen, cl_words)) {
            if (first < 0)
                first = k;
            last = k, failing++;
        }
    if (!failing) {
        printf("PASS: %zu words bit-exact across %d crossings of one buffer, a fresh pattern each\n", 2 * N, CROSSINGS);
        return 0;
    }
    if (failing == 1)
        snprintf(note, sizeof note, "the only failing crossing");
    else
        snprintf(note, sizeof note, "the first of %d failing crossings, the last %d", failing, last);
    if (crossed < CROSSINGS)
        snprintf(note + strlen(note), sizeof note - strlen(note), "; stopped after crossing %d of %d, once %d reads by %s had failed",
                 crossed - 1, CROSSINGS, STOP_AFTER_FAILED_READS, peer);
    if (first % 2 == 0) {
        snprintf(what, sizeof what, "crossing %d of %d: pattern written by OpenCL, read by %s (%s)", first, CROSSINGS, peer, note);
        return pattern_verdict(what, peer_seen[first / 2], crossing_seed(SEED, (uint32_t)first));
    }
    snprintf(what, sizeof what, "crossing %d of %d: pattern written by %s, read by OpenCL (%s)", first, CROSSINGS, peer, note);
    return cl_pattern_verdict(what, cl_words[first / 2], crossing_seed(SEED, (uint32_t)first));
}
/*@ ipc_process @*/
#include <errno.h>
#include <sys/wait.h>
#include <unistd.h>
/* The IPC path's exporter process (clhip's is `clhip __ipc-export`): the peer's
   IpcOpenMemHandle refuses a handle from its own process, so this program runs itself again as
   the exporter, which allocates, writes the handle to a pipe and holds the memory until the
   other pipe closes. What is allocated and opened is the peer template's `ipc` section. */
extern char **environ;
static struct { uint64_t p; pid_t pid; int hold_fd; } exporters[8];

/* In the exporter: the bytes to export and its two pipes, from CLHIP_REPRO_EXPORT; 0 when this
   run is not the exporter. */
static int exporter_asked(unsigned long long *bytes, int *handle_fd, int *hold_fd)
{
    const char *asked = getenv("CLHIP_REPRO_EXPORT");
    if (!asked)
        return 0;
    if (sscanf(asked, "%llu %d %d", bytes, handle_fd, hold_fd) != 3) {
        printf("ERROR: CLHIP_REPRO_EXPORT=%s is not `<bytes> <handle fd> <hold fd>`\n", asked);
        exit(2);
    }
    return 1;
}

/* In the exporter: sends the handle, then holds the memory until the importer closes its pipe. */
static void exporter_serve(int handle_fd, int hold_fd, const void *handle, size_t size)
{
    char end;
    if (write(handle_fd, handle, size) != (ssize_t)size)
        exit(2);
    while (read(hold_fd, &end, 1) > 0)
        ;
}

static void exporter_ended(int status, const char *when)
{
    int code = WIFEXITED(status) ? WEXITSTATUS(status) : 2;
    printf("%s: the exporter (this program run again) %s with %s %d\n", code == 3 ? "FAULT" : "ERROR", when,
           WIFSIGNALED(status) ? "signal" : "exit", WIFSIGNALED(status) ? WTERMSIG(status) : WEXITSTATUS(status));
    finish(code >= 1 && code <= 3 ? code : 2);
}

/* Starts the exporter of `bytes` and reads its handle (`size` bytes) into `handle`; returns its
   slot, which exporter_reap ends. */
static int exporter_start(size_t bytes, void *handle, size_t size)
{
    int handle_pipe[2], hold_pipe[2], status = 0, slot = 0, n = 0;
    static char *argv[] = {(char *)"repro", NULL};
    char asked[96], *env[512];
    while (exporters[slot].pid)
        slot++;
    if (pipe(handle_pipe) || pipe(hold_pipe)) {
        printf("ERROR: pipe: %s\n", strerror(errno));
        exit(2);
    }
    /* Its environment made before the fork: the child of a process with threads (the
       drivers') may only exec. It prints no calls; the case's are this process's. */
    snprintf(asked, sizeof asked, "CLHIP_REPRO_EXPORT=%zu %d %d", bytes, handle_pipe[1], hold_pipe[0]);
    env[n++] = asked;
    for (char **e = environ; *e && n < 511; e++)
        if (strncmp(*e, "CLHIP_PRINT_CALLS=", 18) != 0 && strncmp(*e, "CLHIP_REPRO_EXPORT=", 19) != 0)
            env[n++] = *e;
    env[n] = NULL;
    fflush(stdout);
    if ((exporters[slot].pid = fork()) == 0) {
        close(handle_pipe[0]), close(hold_pipe[1]);
        execve("/proc/self/exe", argv, env);
        _exit(2);
    }
    close(handle_pipe[1]), close(hold_pipe[0]);
    exporters[slot].hold_fd = hold_pipe[1];
    if (read(handle_pipe[0], handle, size) != (ssize_t)size) {
        waitpid(exporters[slot].pid, &status, 0);
        exporter_ended(status, "ended before it sent its handle");
    }
    close(handle_pipe[0]);
    return slot;
}

/* The exporter's slot of opened allocation `p`. */
static int exporter_of(uint64_t p)
{
    int slot = 0;
    while (exporters[slot].p != p)
        slot++;
    return slot;
}

/* Closes the exporter's pipe and waits for it to free the memory and exit. */
static void exporter_reap(int slot)
{
    int status = 0;
    close(exporters[slot].hold_fd);
    waitpid(exporters[slot].pid, &status, 0);
    exporters[slot].p = 0, exporters[slot].pid = 0;
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
        exporter_ended(status, "ended");
}
/*@ host_alloc @*/
/* Page-aligned, zeroed host memory (runtimes/host.rs alloc_pageable). */
static uint64_t host_alloc(size_t len)
{
    size_t bytes = (8 * len + 4095) / 4096 * 4096;
    said("host_alloc");
    return (uintptr_t)memset(aligned_alloc(4096, bytes), 0, bytes);
}
/*@ end @*/
