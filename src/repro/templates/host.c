/*@ check @*/
/* Every API call goes through CHECK: an error ends the program with the call, its error name
   and code. Exit 3 for a device memory fault (clhip: fault), 2 for any other refusal (clhip:
   unsupported), 1 for wrong data (clhip: fail), 0 for a pass; a crash is the signal. */
enum api { CL };
static void check(enum api api, long long code, const char *call, int line)
{
    (void)api;
    if (code == 0)
        return;
    int fault = code == -5 || code == -14; /* as clhip's ApiError::is_device_fault */
    printf("%s: line %d: %s returned %s (%lld)\n", fault ? "FAULT" : "ERROR", line, call,
           cl_error_name(code), code);
    exit(fault ? 3 : 2);
}
#define CHECK(api, call) check(api, (long long)(call), #call, __LINE__)
/*@ host_peer @*/
/* The host as the peer (runtimes/host.rs): page-aligned, zeroed host memory; its loops use
   volatile access, so a stale read shows what the memory really held at that moment. */
static void peer_upload(uint64_t p, const float *data, size_t len)
{
    memcpy((void *)(uintptr_t)p, data, 8 * len);
}

static void peer_download(uint64_t p, float *out, size_t len)
{
    volatile float *x = (volatile float *)(uintptr_t)p;
    for (size_t i = 0; i < 2 * len; i++)
        out[i] = x[i];
}

static void peer_synchronize(void) {}
/*@ host_pattern @*/
static void peer_fill_pattern(uint64_t p, size_t len, uint32_t seed)
{
    volatile uint32_t *w = (volatile uint32_t *)(uintptr_t)p;
    for (size_t i = 0; i < 2 * len; i++)
        w[i] = pattern_word(seed, (uint32_t)i);
}

/* Returns the mismatches; the first one's index and word in *first, *got. */
static size_t peer_check_pattern(uint64_t p, size_t len, uint32_t seed, size_t *first,
                                 uint32_t *got)
{
    volatile uint32_t *w = (volatile uint32_t *)(uintptr_t)p;
    size_t bad = 0;
    for (size_t i = 0; i < 2 * len; i++) {
        uint32_t x = w[i];
        if (x != pattern_word(seed, (uint32_t)i) && bad++ == 0)
            *first = i, *got = x;
    }
    return bad;
}
/*@ host_elementwise @*/
static void peer_scale(uint64_t p, size_t len, float s)
{
    volatile float *x = (volatile float *)(uintptr_t)p;
    for (size_t i = 0; i < 2 * len; i++)
        x[i] = x[i] * s;
}

static void peer_magnitude(uint64_t p, size_t len)
{
    volatile float *x = (volatile float *)(uintptr_t)p;
    for (size_t i = 0; i < len; i++) {
        float re = x[2 * i], im = x[2 * i + 1];
        x[2 * i] = sqrtf(re * re + im * im), x[2 * i + 1] = 0.0f;
    }
}
/*@ end @*/
