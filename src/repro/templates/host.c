/*@ check @*/
/* Every OpenCL call goes through CHECK: an error ends the program naming the call, the error
   and its code, exit 3 for a device memory fault as clhip's ApiError::is_device_fault names
   one (clhip: fault), else 2 (clhip: unsupported). */
enum api { CL };
static void check(enum api api, long long code, const char *call, int line)
{
    int fault = api == CL && (code == CL_OUT_OF_RESOURCES || code == CL_EXEC_STATUS_ERROR_FOR_EVENTS_IN_WAIT_LIST);
    if (code == 0)
        return;
    printf("%s: line %d: %s returned %s (%lld)\n", fault ? "FAULT" : "ERROR", line, call, cl_error_name(code), code);
    exit(fault ? 3 : 2);
}

/* The end of the program: the host has no device to ask for a pending fault. */
static void finish(int code) { exit(code); }
#define CHECK(api, call) (said(#call), check(api, (long long)(call), #call, __LINE__))
/*@ host_peer @*/
/* The host as the peer (runtimes/host.rs); its loops read and write through volatile, so a
   stale read shows what the memory held at that moment. */
static void peer_upload(uint64_t p, const void *data, size_t bytes)
{
    said("peer_upload");
    memcpy((void *)(uintptr_t)p, data, bytes);
}

static void peer_download(uint64_t p, float *out, size_t bytes)
{
    said("peer_download");
    for (size_t i = 0; i < bytes / 4; i++)
        out[i] = ((volatile float *)(uintptr_t)p)[i];
}
/*@ host_pattern @*/
static void peer_fill_pattern(uint64_t p, uint32_t seed)
{
    said("peer_fill_pattern");
    for (uint32_t i = 0; i < 2 * N; i++)
        ((volatile uint32_t *)(uintptr_t)p)[i] = pattern_word(seed, i);
}

/* The host's bit-exact check: the mismatches, the first one's index and its word in seen[]. */
static void peer_check_pattern(uint64_t p, uint32_t seed, uint64_t seen[3])
{
    said("peer_check_pattern");
    for (uint32_t i = 0; i < 2 * N; i++) {
        uint32_t x = ((volatile uint32_t *)(uintptr_t)p)[i];
        if (x != pattern_word(seed, i) && seen[0]++ == 0)
            seen[1] = i, seen[2] = x;
    }
}
/*@ host_elementwise @*/
static void peer_scale(uint64_t p, float s)
{
    said("peer_scale");
    volatile float *x = (volatile float *)(uintptr_t)p;
    for (size_t i = 0; i < 2 * N; i++)
        x[i] = x[i] * s;
}

static void peer_magnitude(uint64_t p)
{
    said("peer_magnitude");
    volatile float *x = (volatile float *)(uintptr_t)p;
    for (size_t i = 0; i < N; i++) {
        float re = x[2 * i], im = x[2 * i + 1];
        x[2 * i] = sqrtf(re * re + im * im), x[2 * i + 1] = 0.0f;
    }
}
/*@ end @*/
