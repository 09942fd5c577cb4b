/*@ includes @*/
#include <cuda.h>
/*@ include_rtc @*/
#include <nvrtc.h>
/*@ include_blas @*/
#include <cublas_v2.h>
/*@ include_solver @*/
#include <cusolverDn.h>
/*@ check @*/
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
    /*@@ more names @@*/
    int fault = api == CL ? code == CL_OUT_OF_RESOURCES || code == CL_EXEC_STATUS_ERROR_FOR_EVENTS_IN_WAIT_LIST
                          : api == CU && is_fault((CUresult)code);
    printf("%s: line %d: %s returned %s (%lld)\n", fault ? "FAULT" : "ERROR", line, call, name, code);
    finish(fault ? 3 : 2);
}
#define CHECK(api, call) (said(#call), check(api, (long long)(call), #call, __LINE__))
/*@ peer @*/
/* The CUDA device as the peer (runtimes/cuda): its primary context, one blocking stream. */
static CUdevice cu_device;
static CUcontext cu_context;
static CUstream stream;
/*@@ scratch decl @@*/

static void peer_open(void)
{
    call_scope = "open"; /* clhip opens its peer once per worker */
    CHECK(CU, cuInit(0));
    CHECK(CU, cuDeviceGet(&cu_device, PEER_ORDINAL));
    CHECK(CU, cuDevicePrimaryCtxRetain(&cu_context, cu_device));
    CHECK(CU, cuCtxSetCurrent(cu_context));
    CHECK(CU, cuStreamCreate(&stream, 0));
    /*@@ scratch @@*/
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
/*@ scratch_decl @*/
static CUdeviceptr scratch; /* the check kernel's result words, cpotrf's info */
/*@ scratch_alloc @*/
    CHECK(CU, cuMemAlloc(&scratch, 24));
/*@ event @*/
/* The event sync's peer half: an event after the work so far, waited for on the host. */
static void peer_event_sync(void)
{
    static CUevent event;
    if (!event)
        CHECK(CU, cuEventCreate(&event, CU_EVENT_DISABLE_TIMING));
    CHECK(CU, cuEventRecord(event, stream));
    CHECK(CU, cuEventSynchronize(event));
}
/*@ kernels @*/
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
/*@ pattern @*/
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
/*@ elementwise @*/
static void peer_scale(uint64_t p, float s)
{
    unsigned long long ptr = p, n = N;
    void *args[] = {&ptr, &s, &n};
    peer_launch("clhip_cscale", n, args);
}

static void peer_magnitude(uint64_t p)
{
    unsigned long long ptr = p, n = N;
    void *args[] = {&ptr, &n};
    peer_launch("clhip_cmagnitude", n, args);
}
/*@ blas @*/
/* C = A B + beta C by cuBLAS on the peer's stream, host pointer mode (runtimes/cuda/blas.rs). */
static void peer_cgemm(uint64_t a, uint64_t b, uint64_t c, const double beta[2])
{
    cublasHandle_t blas;
    cuComplex one = {1.0f, 0.0f}, cbeta = {(float)beta[0], (float)beta[1]};
    CHECK(CUBLAS, cublasCreate(&blas));
    CHECK(CUBLAS, cublasSetStream(blas, (cudaStream_t)stream));
    CHECK(CUBLAS, cublasSetPointerMode(blas, CUBLAS_POINTER_MODE_HOST));
    CHECK(CUBLAS, cublasCgemm(blas, CUBLAS_OP_N, CUBLAS_OP_N, (int)N, (int)N, (int)N, &one,
                              (const cuComplex *)(uintptr_t)a, (int)N, (const cuComplex *)(uintptr_t)b,
                              (int)N, &cbeta, (cuComplex *)(uintptr_t)c, (int)N));
}
/*@ solver @*/
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
/*@ ipc @*/
/* The exporter's side (common.c's ipc_process runs this program again as it): a device
   allocation and its IPC handle, held until the importer lets go. */
static void ipc_exporter(void)
{
    unsigned long long bytes;
    int handle_fd, hold_fd;
    CUipcMemHandle h;
    CUdeviceptr exported;
    if (!exporter_asked(&bytes, &handle_fd, &hold_fd))
        return;
    CHECK(CU, cuInit(0));
    CHECK(CU, cuDeviceGet(&cu_device, PEER_ORDINAL));
    CHECK(CU, cuDevicePrimaryCtxRetain(&cu_context, cu_device));
    CHECK(CU, cuCtxSetCurrent(cu_context));
    CHECK(CU, cuMemAlloc(&exported, (size_t)bytes));
    CHECK(CU, cuIpcGetMemHandle(&h, exported));
    exporter_serve(handle_fd, hold_fd, &h, sizeof h);
    CHECK(CU, cuMemFree(exported));
    exit(0);
}

/* Another process's allocation of `bytes`, opened here through its IPC handle. */
static uint64_t ipc_open(size_t bytes)
{
    CUipcMemHandle h;
    CUdeviceptr opened;
    int slot = exporter_start(bytes, &h, sizeof h);
    CHECK(CU, cuIpcOpenMemHandle(&opened, h, CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS));
    return exporters[slot].p = opened;
}

/* Closes the opened allocation; the exporter, its pipe closed, frees it and exits. */
static void ipc_close(uint64_t p)
{
    int slot = exporter_of(p);
    CHECK(CU, cuIpcCloseMemHandle((CUdeviceptr)p));
    exporter_reap(slot);
}
/*@ vmm @*/
/* A VMM allocation exportable as a POSIX fd (runtimes/cuda/memory.rs alloc_exportable,
   gpu/memory.rs map_exportable): the device's VMM support, the minimum granularity, cuMemCreate,
   then reserved, mapped and opened for read/write by this device. A refused step ends the
   program, which frees the steps before it with the process. */
struct vmm {
    uint64_t va;
    size_t size;
    CUmemGenericAllocationHandle handle;
};

static void vmm_alloc(struct vmm *m, size_t bytes)
{
    CUmemAllocationProp prop;
    CUmemAccessDesc access;
    CUdeviceptr va;
    size_t gran = 0;
    int vmm = 0;
    memset(&prop, 0, sizeof prop);
    prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    prop.requestedHandleTypes = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;
    prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    prop.location.id = cu_device;
    CHECK(CU, cuDeviceGetAttribute(&vmm, CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED, cu_device));
    if (!vmm) {
        printf("UNSUPPORTED: device has no virtual memory management\n");
        finish(2);
    }
    CHECK(CU, cuMemGetAllocationGranularity(&gran, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM));
    gran = gran ? gran : 1;
    m->size = (bytes + gran - 1) / gran * gran;
    CHECK(CU, cuMemCreate(&m->handle, m->size, &prop, 0));
    CHECK(CU, cuMemAddressReserve(&va, m->size, 0, 0, 0));
    CHECK(CU, cuMemMap(va, m->size, 0, m->handle, 0));
    memset(&access, 0, sizeof access);
    access.location = prop.location;
    access.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
    CHECK(CU, cuMemSetAccess(va, m->size, &access, 1));
    m->va = va;
}

/* The allocation's POSIX fd (an opaque fd, for cl_khr_external_memory_opaque_fd). */
static int vmm_export(const struct vmm *m)
{
    int fd = -1;
    CHECK(CU, cuMemExportToShareableHandle(&fd, m->handle, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0));
    if (fd < 0) {
        printf("UNSUPPORTED: cuMemExportToShareableHandle gave no fd\n");
        finish(2);
    }
    return fd;
}

static void vmm_free(const struct vmm *m)
{
    CHECK(CU, cuMemUnmap(m->va, m->size));
    CHECK(CU, cuMemAddressFree(m->va, m->size));
    CHECK(CU, cuMemRelease(m->handle));
}
/*@ external_memory @*/
/* Another API's memory, an opaque fd of `size` bytes (`dedicated`: a dedicated allocation, as
   its exporter made it), imported and its first `bytes` mapped (runtimes/cuda/memory.rs
   import_memory); on success the driver owns the fd. */
struct imported {
    uint64_t p;
    CUexternalMemory ext;
};

static void peer_import_memory(struct imported *m, int fd, unsigned long long size, int dedicated, size_t bytes)
{
    CUDA_EXTERNAL_MEMORY_HANDLE_DESC desc;
    CUDA_EXTERNAL_MEMORY_BUFFER_DESC buffer;
    CUdeviceptr p;
    memset(&desc, 0, sizeof desc);
    desc.type = CU_EXTERNAL_MEMORY_HANDLE_TYPE_OPAQUE_FD;
    desc.handle.fd = fd;
    desc.size = size;
    desc.flags = dedicated ? CUDA_EXTERNAL_MEMORY_DEDICATED : 0;
    CHECK(CU, cuImportExternalMemory(&m->ext, &desc));
    memset(&buffer, 0, sizeof buffer);
    buffer.size = bytes;
    CHECK(CU, cuExternalMemoryGetMappedBuffer(&p, m->ext, &buffer));
    m->p = p;
}

/* The mapping, then the import (cuExternalMemoryGetMappedBuffer's documentation). */
static void peer_free_imported(const struct imported *m)
{
    CHECK(CU, cuMemFree(m->p));
    CHECK(CU, cuDestroyExternalMemory(m->ext));
}
/*@ external_semaphore @*/
/* A binary semaphore imported from an opaque fd, signalled and waited for on the peer's stream
   with all-zero parameters (a binary semaphore has no fence value). */
typedef CUexternalSemaphore peer_semaphore;

static CUexternalSemaphore peer_import_semaphore(int fd)
{
    CUDA_EXTERNAL_SEMAPHORE_HANDLE_DESC desc;
    CUexternalSemaphore sem;
    memset(&desc, 0, sizeof desc);
    desc.type = CU_EXTERNAL_SEMAPHORE_HANDLE_TYPE_OPAQUE_FD;
    desc.handle.fd = fd;
    CHECK(CU, cuImportExternalSemaphore(&sem, &desc));
    return sem;
}

static void peer_signal_semaphore(CUexternalSemaphore sem)
{
    CUDA_EXTERNAL_SEMAPHORE_SIGNAL_PARAMS params;
    memset(&params, 0, sizeof params);
    CHECK(CU, cuSignalExternalSemaphoresAsync(&sem, &params, 1, stream));
}

static void peer_wait_semaphore(CUexternalSemaphore sem)
{
    CUDA_EXTERNAL_SEMAPHORE_WAIT_PARAMS params;
    memset(&params, 0, sizeof params);
    CHECK(CU, cuWaitExternalSemaphoresAsync(&sem, &params, 1, stream));
}

static void peer_destroy_semaphore(CUexternalSemaphore sem) { CHECK(CU, cuDestroyExternalSemaphore(sem)); }
/*@ uuid @*/
/* The GPU's UUID, by which the Vulkan broker finds the same GPU (runtimes/cuda/discover.rs). */
static void peer_uuid(unsigned char uuid[16])
{
    CUuuid u;
    CHECK(CU, cuDeviceGetUuid_v2(&u, cu_device));
    memcpy(uuid, u.bytes, 16);
}
/*@ end @*/
