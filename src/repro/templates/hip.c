/*@ includes @*/
#include <hip/hip_runtime_api.h>
/*@ include_rtc @*/
#include <hip/hiprtc.h>
/*@ include_blas @*/
#include <rocblas/rocblas.h>
/*@ include_solver @*/
#include <rocblas/rocblas.h>
#include <rocsolver/rocsolver.h>
/*@ check @*/
static int is_fault(hipError_t e) { return e == hipErrorIllegalAddress || e == hipErrorLaunchFailure; }

/* Ends the program with code, or with 3 (clhip: fault) where a device fault is pending on the
   device: clhip asks hipDeviceSynchronize after every case (ops::execute), because a library's
   error (rocBLAS's) or a refusal can hide the sticky fault that caused it. */
static void finish(int code)
{
    hipError_t pending;
    if (code == 3)
        exit(3);
    call_scope = "pending-fault";
    said("hipDeviceSynchronize()");
    pending = hipDeviceSynchronize();
    call_scope = NULL;
    if (!is_fault(pending))
        exit(code);
    printf("FAULT: a device fault is pending: hipDeviceSynchronize() returned %s (%d) after the %s above\n",
           hipGetErrorName(pending), (int)pending, code == 0 ? "pass" : code == 1 ? "wrong data" : "error");
    exit(3);
}

/* Every API call goes through CHECK: an error ends the program naming the call, the error and
   its code, exit 3 for a device memory fault as clhip's ApiError::is_device_fault names one
   (clhip: fault), else 2 (clhip: unsupported) unless finish() finds a fault pending.
   ROCm ends a GPU page fault itself: it prints "Memory access fault by GPU node-N ... on
   address ..." and aborts (SIGABRT), which clhip reports as a fault too. */
static void check(enum api api, long long code, const char *call, int line)
{
    const char *name = "an error";
    if (code == 0)
        return;
    if (api == CL)
        name = cl_error_name(code);
    if (api == HIP)
        name = hipGetErrorName((hipError_t)code);
    /*@@ more names @@*/
    int fault = api == CL ? code == CL_OUT_OF_RESOURCES || code == CL_EXEC_STATUS_ERROR_FOR_EVENTS_IN_WAIT_LIST
                          : api == HIP && is_fault((hipError_t)code);
    printf("%s: line %d: %s returned %s (%lld)\n", fault ? "FAULT" : "ERROR", line, call, name, code);
    finish(fault ? 3 : 2);
}
#define CHECK(api, call) (said(#call), check(api, (long long)(call), #call, __LINE__))
/*@ peer @*/
/* The HIP device as the peer (runtimes/hip): current on this thread, one blocking stream. */
static hipStream_t stream;
/*@@ scratch decl @@*/

static void peer_open(void)
{
    call_scope = "open"; /* clhip opens its peer once per worker */
    CHECK(HIP, hipSetDevice(PEER_ORDINAL));
    CHECK(HIP, hipStreamCreate(&stream));
    /*@@ scratch @@*/
    call_scope = NULL;
}

static void peer_synchronize(void) { CHECK(HIP, hipStreamSynchronize(stream)); }

/* The direction said explicitly: with hipMemcpyDefault the runtime would copy on the host when
   it does not know the device pointer (OpenCL's). */
static void peer_upload(uint64_t p, const void *data, size_t bytes)
{
    CHECK(HIP, hipMemcpyAsync((void *)(uintptr_t)p, data, bytes, hipMemcpyHostToDevice, stream));
    peer_synchronize();
}

static void peer_download(uint64_t p, void *out, size_t bytes)
{
    CHECK(HIP, hipMemcpyAsync(out, (void *)(uintptr_t)p, bytes, hipMemcpyDeviceToHost, stream));
    peer_synchronize();
}
/*@ scratch_decl @*/
static void *scratch; /* the check kernel's result words, cpotrf's info */
/*@ scratch_alloc @*/
    CHECK(HIP, hipMalloc(&scratch, 24));
/*@ event @*/
/* The event sync's peer half: an event after the work so far, waited for on the host. */
static void peer_event_sync(void)
{
    static hipEvent_t event;
    if (!event)
        CHECK(HIP, hipEventCreateWithFlags(&event, hipEventDisableTiming));
    CHECK(HIP, hipEventRecord(event, stream));
    CHECK(HIP, hipEventSynchronize(event));
}
/*@ kernels @*/
/* clhip's HIP kernels, compiled by hiprtc for the device's gcnArchName, 256 threads a block
   (runtimes/gpu.rs BLOCK). */
static hipModule_t module;

static void peer_load_kernels(void)
{
    hipDeviceProp_t prop;
    hiprtcProgram prog;
    size_t size;
    char arch[300], *text;
    call_scope = "open";
    CHECK(HIP, hipGetDeviceProperties(&prop, PEER_ORDINAL));
    snprintf(arch, sizeof arch, "--offload-arch=%s", prop.gcnArchName);
    const char *options[] = {arch};
    CHECK(HIPRTC, hiprtcCreateProgram(&prog, PEER_SOURCE, "clhip.hip", 0, NULL, NULL));
    if (hiprtcCompileProgram(prog, 1, options) != HIPRTC_SUCCESS) {
        CHECK(HIPRTC, hiprtcGetProgramLogSize(prog, &size));
        CHECK(HIPRTC, hiprtcGetProgramLog(prog, text = malloc(size)));
        printf("ERROR: hiprtc could not compile the kernels for %s:\n%s\n", arch, text);
        exit(2);
    }
    CHECK(HIPRTC, hiprtcGetCodeSize(prog, &size));
    CHECK(HIPRTC, hiprtcGetCode(prog, text = malloc(size)));
    CHECK(HIP, hipModuleLoadData(&module, text));
    call_scope = NULL;
}

static void peer_launch(const char *name, uint64_t threads, void **args)
{
    hipFunction_t f;
    CHECK(HIP, hipModuleGetFunction(&f, module, name));
    CHECK(HIP, hipModuleLaunchKernel(f, (unsigned)((threads + 255) / 256), 1, 1, 256, 1, 1, 0, stream, args, NULL));
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
    unsigned long long result[3] = {0, ~0ull, 0}, ptr = p, words = 2 * N, out = (uintptr_t)scratch;
    void *args[] = {&ptr, &seed, &words, &out};
    uint32_t word = 0;
    peer_upload(out, result, sizeof result);
    peer_launch("clhip_pattern_check", words, args);
    peer_download(out, result, sizeof result);
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
/* A rocBLAS handle on the peer's stream, host pointer mode (runtimes/hip/blas.rs); rocSOLVER
   works through it too. */
static rocblas_handle blas(void)
{
    static rocblas_handle handle;
    if (!handle) {
        CHECK(ROCBLAS, rocblas_create_handle(&handle));
        CHECK(ROCBLAS, rocblas_set_stream(handle, stream));
        CHECK(ROCBLAS, rocblas_set_pointer_mode(handle, rocblas_pointer_mode_host));
    }
    return handle;
}

/* C = A B + beta C by rocBLAS. */
static void peer_cgemm(uint64_t a, uint64_t b, uint64_t c, const double beta[2])
{
    rocblas_float_complex one = {1.0f, 0.0f}, cbeta = {(float)beta[0], (float)beta[1]};
    CHECK(ROCBLAS, rocblas_cgemm(blas(), rocblas_operation_none, rocblas_operation_none, (int)N, (int)N, (int)N,
                                 &one, (const rocblas_float_complex *)(uintptr_t)a, (int)N,
                                 (const rocblas_float_complex *)(uintptr_t)b, (int)N, &cbeta,
                                 (rocblas_float_complex *)(uintptr_t)c, (int)N));
}
/*@ solver @*/
/* rocSOLVER's cpotrf of the lower triangle; info read back from the device. */
static int peer_cpotrf(uint64_t a)
{
    int info = 0;
    CHECK(ROCBLAS, rocsolver_cpotrf(blas(), rocblas_fill_lower, (int)N, (rocblas_float_complex *)(uintptr_t)a, (int)N,
                                    (rocblas_int *)scratch));
    peer_download((uintptr_t)scratch, &info, 4);
    return info;
}
/*@ ipc @*/
/* The exporter's side (common.c's ipc_process runs this program again as it): a device
   allocation and its IPC handle, held until the importer lets go. */
static void ipc_exporter(void)
{
    unsigned long long bytes;
    int handle_fd, hold_fd;
    hipIpcMemHandle_t h;
    void *exported;
    if (!exporter_asked(&bytes, &handle_fd, &hold_fd))
        return;
    CHECK(HIP, hipSetDevice(PEER_ORDINAL));
    CHECK(HIP, hipMalloc(&exported, (size_t)bytes));
    CHECK(HIP, hipIpcGetMemHandle(&h, exported));
    exporter_serve(handle_fd, hold_fd, &h, sizeof h);
    CHECK(HIP, hipFree(exported));
    exit(0);
}

/* Another process's allocation of `bytes`, opened here through its IPC handle. */
static uint64_t ipc_open(size_t bytes)
{
    hipIpcMemHandle_t h;
    void *opened;
    int slot = exporter_start(bytes, &h, sizeof h);
    CHECK(HIP, hipIpcOpenMemHandle(&opened, h, hipIpcMemLazyEnablePeerAccess));
    return exporters[slot].p = (uintptr_t)opened;
}

/* Closes the opened allocation; the exporter, its pipe closed, frees it and exits. */
static void ipc_close(uint64_t p)
{
    int slot = exporter_of(p);
    CHECK(HIP, hipIpcCloseMemHandle((void *)(uintptr_t)p));
    exporter_reap(slot);
}
/*@ vmm @*/
/* A VMM allocation exportable as a POSIX fd, a dma-buf on ROCm (runtimes/hip/memory.rs
   alloc_exportable, gpu/memory.rs map_exportable): the device's VMM support where the headers
   have the attribute (ROCm 5.3 on; before, hipMemCreate says), the minimum granularity,
   hipMemCreate, then reserved, mapped and opened for read/write by this device. The properties
   are set by name: the headers built against give their ROCm's layout (5.3 reordered it). A
   refused step ends the program, which frees the steps before it with the process. */
struct vmm {
    uint64_t va;
    size_t size;
    hipMemGenericAllocationHandle_t handle;
};

static void vmm_alloc(struct vmm *m, size_t bytes)
{
    hipMemAllocationProp prop;
    hipMemAccessDesc access;
    void *va = NULL;
    size_t gran = 0;
    memset(&prop, 0, sizeof prop);
    prop.type = hipMemAllocationTypePinned;
    prop.requestedHandleType = hipMemHandleTypePosixFileDescriptor;
    prop.location.type = hipMemLocationTypeDevice;
    prop.location.id = PEER_ORDINAL;
#if HIP_VERSION_MAJOR > 5 || (HIP_VERSION_MAJOR == 5 && HIP_VERSION_MINOR >= 3)
    {
        int vmm = 0;
        CHECK(HIP, hipDeviceGetAttribute(&vmm, hipDeviceAttributeVirtualMemoryManagementSupported, PEER_ORDINAL));
        if (!vmm) {
            printf("UNSUPPORTED: device has no virtual memory management\n");
            finish(2);
        }
    }
#endif
    CHECK(HIP, hipMemGetAllocationGranularity(&gran, &prop, hipMemAllocationGranularityMinimum));
    gran = gran ? gran : 1;
    m->size = (bytes + gran - 1) / gran * gran;
    CHECK(HIP, hipMemCreate(&m->handle, m->size, &prop, 0));
    CHECK(HIP, hipMemAddressReserve(&va, m->size, 0, NULL, 0));
    CHECK(HIP, hipMemMap(va, m->size, 0, m->handle, 0));
    memset(&access, 0, sizeof access);
    access.location = prop.location;
    access.flags = hipMemAccessFlagsProtReadWrite;
    CHECK(HIP, hipMemSetAccess(va, m->size, &access, 1));
    m->va = (uintptr_t)va;
}

/* The allocation's POSIX fd (a dma-buf, for cl_khr_external_memory_dma_buf). */
static int vmm_export(const struct vmm *m)
{
    int fd = -1;
    CHECK(HIP, hipMemExportToShareableHandle(&fd, m->handle, hipMemHandleTypePosixFileDescriptor, 0));
    if (fd < 0) {
        printf("UNSUPPORTED: hipMemExportToShareableHandle gave no fd\n");
        finish(2);
    }
    return fd;
}

static void vmm_free(const struct vmm *m)
{
    CHECK(HIP, hipMemUnmap((void *)(uintptr_t)m->va, m->size));
    CHECK(HIP, hipMemAddressFree((void *)(uintptr_t)m->va, m->size));
    CHECK(HIP, hipMemRelease(m->handle));
}
/*@ external_memory @*/
#ifndef hipExternalMemoryDedicated
#define hipExternalMemoryDedicated 0x1 /* hip_runtime_api.h from ROCm 6.0; CUDA's value */
#endif
/* Another API's memory, an opaque fd of `size` bytes (`dedicated`: a dedicated allocation, as
   its exporter made it), imported and its first `bytes` mapped (runtimes/hip/interop.rs
   import_external_memory, map_external_buffer). */
struct imported {
    uint64_t p;
    hipExternalMemory_t ext;
};

static void peer_import_memory(struct imported *m, int fd, unsigned long long size, int dedicated, size_t bytes)
{
    hipExternalMemoryHandleDesc desc;
    hipExternalMemoryBufferDesc buffer;
    void *p = NULL;
    memset(&desc, 0, sizeof desc);
    desc.type = hipExternalMemoryHandleTypeOpaqueFd;
    desc.handle.fd = fd;
    desc.size = size;
    desc.flags = dedicated ? hipExternalMemoryDedicated : 0;
    CHECK(HIP, hipImportExternalMemory(&m->ext, &desc));
    memset(&buffer, 0, sizeof buffer);
    buffer.size = bytes;
    CHECK(HIP, hipExternalMemoryGetMappedBuffer(&p, m->ext, &buffer));
    m->p = (uintptr_t)p;
}

/* The mapping, then the import (clr's ihipFree takes the mapped buffer as an interop object). */
static void peer_free_imported(const struct imported *m)
{
    CHECK(HIP, hipFree((void *)(uintptr_t)m->p));
    CHECK(HIP, hipDestroyExternalMemory(m->ext));
}
/*@ external_semaphore @*/
/* A binary semaphore imported from an opaque fd, signalled and waited for on the peer's stream
   with all-zero parameters (a binary semaphore has no fence value; clr refuses any flags). On
   Linux clr refuses every import (runtimes/hip/memory.rs import_semaphore says why). */
typedef hipExternalSemaphore_t peer_semaphore;

static hipExternalSemaphore_t peer_import_semaphore(int fd)
{
    hipExternalSemaphoreHandleDesc desc;
    hipExternalSemaphore_t sem;
    memset(&desc, 0, sizeof desc);
    desc.type = hipExternalSemaphoreHandleTypeOpaqueFd;
    desc.handle.fd = fd;
    CHECK(HIP, hipImportExternalSemaphore(&sem, &desc));
    return sem;
}

static void peer_signal_semaphore(hipExternalSemaphore_t sem)
{
    hipExternalSemaphoreSignalParams params;
    memset(&params, 0, sizeof params);
    CHECK(HIP, hipSignalExternalSemaphoresAsync(&sem, &params, 1, stream));
}

static void peer_wait_semaphore(hipExternalSemaphore_t sem)
{
    hipExternalSemaphoreWaitParams params;
    memset(&params, 0, sizeof params);
    CHECK(HIP, hipWaitExternalSemaphoresAsync(&sem, &params, 1, stream));
}

static void peer_destroy_semaphore(hipExternalSemaphore_t sem) { CHECK(HIP, hipDestroyExternalSemaphore(sem)); }
/*@ uuid @*/
/* The GPU's UUID, by which the Vulkan broker finds the same GPU (runtimes/hip/discover.rs). */
static void peer_uuid(unsigned char uuid[16])
{
    hipUUID u;
    CHECK(HIP, hipDeviceGetUuid(&u, PEER_ORDINAL));
    memcpy(uuid, u.bytes, 16);
}
/*@ dmabuf @*/
#include <dlfcn.h>
/* OpenCL's allocation into HIP (runtimes/hip/interop.rs import_cl_dmabuf): the HSA runtime both
   run on exports it as a dma-buf (hsa_amd_portable_export_dmabuf, ROCr's hsa_ext_amd.h from
   ROCm 5.6), HIP imports the fd (size: the allocation's offset in it plus its bytes) and maps
   it at that offset, and the fd is closed (the import keeps its own reference).
   libhsa-runtime64 is opened at run time where clhip looks for it: in the ROCm install
   ($ROCM_PATH, else /opt/rocm), else the one HIP already runs on; its hsa_init takes one more
   reference to the runtime HIP holds. */
static struct {
    int (*init)(void);
    int (*export_dmabuf)(const void *ptr, size_t size, int *dmabuf, uint64_t *offset);
    int (*close_dmabuf)(int dmabuf);
} hsa;

static void hsa_open(void)
{
    static const char *name = "libhsa-runtime64.so.1";
    const char *rocm = getenv("ROCM_PATH");
    char installed[4096];
    void *lib;
    int s;
    if (hsa.init)
        return;
    snprintf(installed, sizeof installed, "%s/lib/%s", rocm && *rocm ? rocm : "/opt/rocm", name);
    if (!(lib = dlopen(installed, RTLD_NOW)) && !(lib = dlopen(name, RTLD_NOW | RTLD_NOLOAD))) {
        printf("UNSUPPORTED: libhsa-runtime64 not found (tried %s, and HIP has loaded none)\n", installed);
        finish(2);
    }
    hsa.init = (int (*)(void))dlsym(lib, "hsa_init");
    hsa.export_dmabuf = (int (*)(const void *, size_t, int *, uint64_t *))dlsym(lib, "hsa_amd_portable_export_dmabuf");
    hsa.close_dmabuf = (int (*)(int))dlsym(lib, "hsa_amd_portable_close_dmabuf");
    if (!hsa.init || !hsa.export_dmabuf || !hsa.close_dmabuf) {
        printf("UNSUPPORTED: %s lacks hsa_init, hsa_amd_portable_export_dmabuf or hsa_amd_portable_close_dmabuf "
               "(the dma-buf export of ROCm 5.6 and later)\n", name);
        finish(2);
    }
    call_scope = "open"; /* clhip opens its HSA runtime once per peer */
    said("hsa_init");
    if ((s = hsa.init()) != 0) {
        printf("UNSUPPORTED: initialising the HSA runtime: hsa_init returned 0x%x\n", s);
        finish(2);
    }
    call_scope = NULL;
}

/* OpenCL's SVM allocation of `bytes` at `svm`, exported and imported into HIP. */
static void dmabuf_import(struct imported *m, void *svm, size_t bytes)
{
    hipExternalMemoryHandleDesc desc;
    hipExternalMemoryBufferDesc buffer;
    uint64_t offset = 0;
    void *p = NULL;
    int fd = -1, s;
    hsa_open();
    said("hsa_amd_portable_export_dmabuf");
    if ((s = hsa.export_dmabuf(svm, bytes, &fd, &offset)) != 0) {
        printf("UNSUPPORTED: HSA refused to export the OpenCL allocation as a dma-buf: "
               "hsa_amd_portable_export_dmabuf returned 0x%x (%zu B at %p)\n", s, bytes, svm);
        finish(2);
    }
    memset(&desc, 0, sizeof desc);
    desc.type = hipExternalMemoryHandleTypeOpaqueFd;
    desc.handle.fd = fd;
    desc.size = offset + bytes;
    CHECK(HIP, hipImportExternalMemory(&m->ext, &desc));
    memset(&buffer, 0, sizeof buffer);
    buffer.offset = offset;
    buffer.size = bytes;
    CHECK(HIP, hipExternalMemoryGetMappedBuffer(&p, m->ext, &buffer));
    m->p = (uintptr_t)p;
    /* The mapping stands without the fd: a refused close is worth a line, not the case. */
    said("hsa_amd_portable_close_dmabuf");
    if ((s = hsa.close_dmabuf(fd)) != 0)
        printf("closing the dma-buf: hsa_amd_portable_close_dmabuf returned 0x%x\n", s);
}
/*@ end @*/
