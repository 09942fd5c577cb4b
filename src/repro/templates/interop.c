/*@ cl_extensions @*/
/* Whether the device lists `name` as a whole word of CL_DEVICE_EXTENSIONS (clhip's
   ClSession::has_extension): cl_khr_external_memory is a prefix of another extension's name. */
static int has_extension(const char *name)
{
    static char *list;
    size_t size = 0, n = strlen(name);
    if (!list) {
        CHECK(CL, clGetDeviceInfo(device, CL_DEVICE_EXTENSIONS, 0, NULL, &size));
        list = calloc(size + 1, 1);
        CHECK(CL, clGetDeviceInfo(device, CL_DEVICE_EXTENSIONS, size, list, NULL));
    }
    for (const char *at = list; (at = strstr(at, name)); at += n)
        if ((at == list || at[-1] == ' ') && (at[n] == ' ' || at[n] == 0))
            return 1;
    return 0;
}

/* A refused import of a handle type (name, value), judged as clhip judges it
   (runtimes/opencl/error.rs import_refusal): refused although the device lists the type in its
   answer to `query` is the driver's failure (clhip: fail, 1); not listed, or the list unknown,
   an absence (unsupported, 2); a device fault, a fault (3). */
static void import_refused(const char *call, cl_int code, const char *what, cl_uint query, const char *query_name,
                           const char *type_name, cl_uint type)
{
    cl_uint types[64];
    size_t size = 0;
    int listed = 0;
    if (code == CL_OUT_OF_RESOURCES || code == CL_EXEC_STATUS_ERROR_FOR_EVENTS_IN_WAIT_LIST) {
        printf("FAULT: %s returned %s (%d)\n", call, cl_error_name(code), code);
        finish(3);
    }
    if (clGetDeviceInfo(device, query, sizeof types, types, &size) == CL_SUCCESS)
        for (size_t i = 0; i < size / sizeof *types; i++)
            listed |= types[i] == type;
    if (listed) {
        printf("FAIL: %s returned %s (%d), although %s lists %s\n", call, cl_error_name(code), code, query_name,
               type_name);
        finish(1);
    }
    printf("UNSUPPORTED: %s (%s is not in its %s): %s returned %s (%d)\n", what, type_name, query_name, call,
           cl_error_name(code), code);
    finish(2);
}
/*@ cl_import @*/
/* cl_khr_external_memory's values (OpenCL-Headers cl_ext.h; CL/cl.h does not include it). */
#define CL_DEVICE_EXTERNAL_MEMORY_IMPORT_HANDLE_TYPES_KHR 0x204F
#define CL_EXTERNAL_MEMORY_HANDLE_OPAQUE_FD_KHR 0x2060
#define CL_EXTERNAL_MEMORY_HANDLE_DMA_BUF_KHR 0x2067
#define CL_MEM_DEVICE_HANDLE_LIST_KHR 0x2051
#define CL_MEM_DEVICE_HANDLE_LIST_END_KHR 0

/* OpenCL's import of an fd of `bytes` as a buffer of this device (paths.rs import_fd): both
   extensions checked first, then clCreateBufferWithProperties, which owns the fd once it
   accepts it. */
static cl_mem cl_import_fd(int fd, size_t bytes, cl_mem_properties handle)
{
    int dma_buf = handle == CL_EXTERNAL_MEMORY_HANDLE_DMA_BUF_KHR;
    const char *exts[2] = {"cl_khr_external_memory",
                           dma_buf ? "cl_khr_external_memory_dma_buf" : "cl_khr_external_memory_opaque_fd"};
    const char *type_name = dma_buf ? "CL_EXTERNAL_MEMORY_HANDLE_DMA_BUF_KHR" : "CL_EXTERNAL_MEMORY_HANDLE_OPAQUE_FD_KHR";
    cl_mem_properties props[6] = {handle, (cl_mem_properties)fd, CL_MEM_DEVICE_HANDLE_LIST_KHR,
                                  (cl_mem_properties)(uintptr_t)device, CL_MEM_DEVICE_HANDLE_LIST_END_KHR, 0};
    cl_int err = CL_SUCCESS;
    cl_mem b;
    for (int i = 0; i < 2; i++)
        if (!has_extension(exts[i])) {
            printf("UNSUPPORTED: device lacks %s, so OpenCL has no way to import the peer's fd\n", exts[i]);
            finish(2);
        }
    b = CALL(clCreateBufferWithProperties(context, props, CL_MEM_READ_WRITE, bytes, NULL, &err));
    if (err != CL_SUCCESS)
        import_refused("clCreateBufferWithProperties", err, "OpenCL would not import the peer's fd",
                       CL_DEVICE_EXTERNAL_MEMORY_IMPORT_HANDLE_TYPES_KHR,
                       "CL_DEVICE_EXTERNAL_MEMORY_IMPORT_HANDLE_TYPES_KHR", type_name, (cl_uint)handle);
    return b;
}
/*@ cl_external @*/
/* clEnqueueAcquireExternalMemObjectsKHR / clEnqueueReleaseExternalMemObjectsKHR (cl_ext.h),
   looked up at each call as clhip does (sync.rs external_fns): an OpenCL without them refuses
   the case. A refused acquire or release is the driver's failure (clhip: fail, 1). */
typedef cl_int (*external_mem_fn)(cl_command_queue, cl_uint, const cl_mem *, cl_uint, const cl_event *, cl_event *);

static cl_event external_mem(const char *name, cl_mem m, cl_uint nwait, const cl_event *wait)
{
    cl_platform_id platform;
    external_mem_fn f;
    cl_event ev = NULL;
    cl_int rc;
    CHECK(CL, clGetDeviceInfo(device, CL_DEVICE_PLATFORM, sizeof platform, &platform, NULL));
    f = (external_mem_fn)clGetExtensionFunctionAddressForPlatform(platform, name);
    if (!f) {
        printf("UNSUPPORTED: cl_khr_external_memory entry points: the platform has no %s\n", name);
        finish(2);
    }
    said(name);
    if ((rc = f(queue, 1, &m, nwait, nwait ? wait : NULL, &ev)) != CL_SUCCESS) {
        printf("FAIL: %s returned %s (%d)\n", name, cl_error_name(rc), rc);
        finish(1);
    }
    return ev;
}

/* OpenCL takes imported memory from its exporter, after `wait`. */
static cl_event acquire_external(cl_mem m, cl_uint nwait, const cl_event *wait)
{
    return external_mem("clEnqueueAcquireExternalMemObjectsKHR", m, nwait, wait);
}

/* OpenCL gives imported memory back to its exporter, after `wait`. */
static cl_event release_external(cl_mem m, cl_uint nwait, const cl_event *wait)
{
    return external_mem("clEnqueueReleaseExternalMemObjectsKHR", m, nwait, wait);
}
/*@ end @*/
