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
/*@ cl_semaphore @*/
/* cl_khr_semaphore and cl_khr_external_semaphore (OpenCL-Headers cl_ext.h): binary semaphores
   OpenCL imports from an opaque fd (runtimes/opencl/semaphore.rs), its four entry points
   looked up at the first import. */
typedef struct _cl_semaphore_khr *cl_semaphore_khr;
#define CL_DEVICE_SEMAPHORE_IMPORT_HANDLE_TYPES_KHR 0x204D
#define CL_SEMAPHORE_HANDLE_OPAQUE_FD_KHR 0x2055
#define CL_SEMAPHORE_TYPE_KHR 0x203D
#define CL_SEMAPHORE_TYPE_BINARY_KHR 1
#define CL_SEMAPHORE_DEVICE_HANDLE_LIST_KHR 0x2053
#define CL_SEMAPHORE_DEVICE_HANDLE_LIST_END_KHR 0
typedef cl_semaphore_khr (*create_semaphore_fn)(cl_context, const cl_ulong *, cl_int *);
typedef cl_int (*enqueue_semaphores_fn)(cl_command_queue, cl_uint, const cl_semaphore_khr *, const cl_ulong *, cl_uint,
                                        const cl_event *, cl_event *);
typedef cl_int (*release_semaphore_fn)(cl_semaphore_khr);
static struct {
    create_semaphore_fn create;
    enqueue_semaphores_fn wait, signal;
    release_semaphore_fn release;
} cl_sem;

/* A call through one of cl_sem's pointers, printed and reported under its function's name. */
#define CHECK_AS(api, name, call) (said(name), check(api, (long long)(call), name, __LINE__))

/* clCreateSemaphoreWithPropertiesKHR of a binary semaphore from an opaque fd, for this device
   (CL_SEMAPHORE_DEVICE_HANDLE_LIST_KHR); the import owns the fd once it accepts it. A missing
   entry point is judged as a refused import, as clhip judges it. */
static cl_semaphore_khr cl_import_semaphore(int fd)
{
    static const char *names[4] = {"clCreateSemaphoreWithPropertiesKHR", "clEnqueueWaitSemaphoresKHR",
                                   "clEnqueueSignalSemaphoresKHR", "clReleaseSemaphoreKHR"};
    void **fns[4] = {(void **)&cl_sem.create, (void **)&cl_sem.wait, (void **)&cl_sem.signal, (void **)&cl_sem.release};
    cl_ulong props[8] = {CL_SEMAPHORE_TYPE_KHR, CL_SEMAPHORE_TYPE_BINARY_KHR, CL_SEMAPHORE_HANDLE_OPAQUE_FD_KHR,
                         (cl_ulong)fd, CL_SEMAPHORE_DEVICE_HANDLE_LIST_KHR, (cl_ulong)(uintptr_t)device,
                         CL_SEMAPHORE_DEVICE_HANDLE_LIST_END_KHR, 0};
    const char *what = "OpenCL would not import the Vulkan broker's semaphore";
    cl_platform_id platform;
    cl_semaphore_khr sem;
    cl_int err = CL_SUCCESS;
    CHECK(CL, clGetDeviceInfo(device, CL_DEVICE_PLATFORM, sizeof platform, &platform, NULL));
    for (int i = 0; i < 4; i++)
        if (!(*fns[i] = clGetExtensionFunctionAddressForPlatform(platform, names[i])))
            import_refused(names[i], 0, what, CL_DEVICE_SEMAPHORE_IMPORT_HANDLE_TYPES_KHR,
                           "CL_DEVICE_SEMAPHORE_IMPORT_HANDLE_TYPES_KHR", "CL_SEMAPHORE_HANDLE_OPAQUE_FD_KHR",
                           CL_SEMAPHORE_HANDLE_OPAQUE_FD_KHR);
    said("clCreateSemaphoreWithPropertiesKHR");
    sem = cl_sem.create(context, props, &err);
    if (err != CL_SUCCESS || !sem)
        import_refused("clCreateSemaphoreWithPropertiesKHR", err, what, CL_DEVICE_SEMAPHORE_IMPORT_HANDLE_TYPES_KHR,
                       "CL_DEVICE_SEMAPHORE_IMPORT_HANDLE_TYPES_KHR", "CL_SEMAPHORE_HANDLE_OPAQUE_FD_KHR",
                       CL_SEMAPHORE_HANDLE_OPAQUE_FD_KHR);
    return sem;
}
/*@ vulkan @*/
#include <dlfcn.h>
/* The Vulkan broker (runtimes/vulkan): a third API that exports what OpenCL and the peer can
   only import, opaque fds of memory and binary semaphores. libvulkan.so.1 is opened at run
   time, so that this program builds without a Vulkan SDK: the few types, values and functions
   it uses are declared here, with the values of the Vulkan headers (vulkan_core.h, 1.3); with
   the real header included first, these declarations step aside. */
#ifndef VULKAN_CORE_H_
typedef uint32_t VkFlags;
typedef uint32_t VkBool32;
typedef uint64_t VkDeviceSize;
typedef int VkResult;
typedef int VkStructureType;
typedef struct VkInstance_T *VkInstance;
typedef struct VkPhysicalDevice_T *VkPhysicalDevice;
typedef struct VkDevice_T *VkDevice;
typedef struct VkQueue_T *VkQueue;
typedef struct VkSemaphore_T *VkSemaphore;
typedef struct VkBuffer_T *VkBuffer;
typedef struct VkDeviceMemory_T *VkDeviceMemory;
typedef struct VkImage_T *VkImage;
typedef struct VkAllocationCallbacks VkAllocationCallbacks;
enum {
    VK_SUCCESS = 0,
    VK_STRUCTURE_TYPE_APPLICATION_INFO = 0,
    VK_STRUCTURE_TYPE_INSTANCE_CREATE_INFO = 1,
    VK_STRUCTURE_TYPE_DEVICE_QUEUE_CREATE_INFO = 2,
    VK_STRUCTURE_TYPE_DEVICE_CREATE_INFO = 3,
    VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO = 5,
    VK_STRUCTURE_TYPE_SEMAPHORE_CREATE_INFO = 9,
    VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO = 12,
    VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2 = 1000059000,
    VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PROPERTIES_2 = 1000059001,
    VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_EXTERNAL_BUFFER_INFO = 1000071002,
    VK_STRUCTURE_TYPE_EXTERNAL_BUFFER_PROPERTIES = 1000071003,
    VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_ID_PROPERTIES = 1000071004,
    VK_STRUCTURE_TYPE_EXTERNAL_MEMORY_BUFFER_CREATE_INFO = 1000072000,
    VK_STRUCTURE_TYPE_EXPORT_MEMORY_ALLOCATE_INFO = 1000072002,
    VK_STRUCTURE_TYPE_MEMORY_GET_FD_INFO_KHR = 1000074002,
    VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_EXTERNAL_SEMAPHORE_INFO = 1000076000,
    VK_STRUCTURE_TYPE_EXTERNAL_SEMAPHORE_PROPERTIES = 1000076001,
    VK_STRUCTURE_TYPE_EXPORT_SEMAPHORE_CREATE_INFO = 1000077000,
    VK_STRUCTURE_TYPE_SEMAPHORE_GET_FD_INFO_KHR = 1000079001,
    VK_STRUCTURE_TYPE_MEMORY_DEDICATED_REQUIREMENTS = 1000127000,
    VK_STRUCTURE_TYPE_MEMORY_DEDICATED_ALLOCATE_INFO = 1000127001,
    VK_STRUCTURE_TYPE_BUFFER_MEMORY_REQUIREMENTS_INFO_2 = 1000146000,
    VK_STRUCTURE_TYPE_MEMORY_REQUIREMENTS_2 = 1000146003,
    VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_TIMELINE_SEMAPHORE_FEATURES = 1000207000,
    VK_EXTERNAL_MEMORY_HANDLE_TYPE_OPAQUE_FD_BIT = 0x1,
    VK_EXTERNAL_SEMAPHORE_HANDLE_TYPE_OPAQUE_FD_BIT = 0x1,
    VK_EXTERNAL_MEMORY_FEATURE_DEDICATED_ONLY_BIT = 0x1,
    VK_EXTERNAL_MEMORY_FEATURE_EXPORTABLE_BIT = 0x2,
    VK_EXTERNAL_SEMAPHORE_FEATURE_EXPORTABLE_BIT = 0x1,
    VK_BUFFER_USAGE_TRANSFER_SRC_BIT = 0x1,
    VK_BUFFER_USAGE_TRANSFER_DST_BIT = 0x2,
    VK_BUFFER_USAGE_STORAGE_BUFFER_BIT = 0x20,
    VK_SHARING_MODE_EXCLUSIVE = 0,
    VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT = 0x1,
    VK_QUEUE_TRANSFER_BIT = 0x4,
};
#define VK_API_VERSION_1_1 ((1u << 22) | (1u << 12))
#define VK_API_VERSION_1_2 ((1u << 22) | (2u << 12))
typedef struct VkApplicationInfo {
    VkStructureType sType;
    const void *pNext;
    const char *pApplicationName;
    uint32_t applicationVersion;
    const char *pEngineName;
    uint32_t engineVersion;
    uint32_t apiVersion;
} VkApplicationInfo;
typedef struct VkInstanceCreateInfo {
    VkStructureType sType;
    const void *pNext;
    VkFlags flags;
    const VkApplicationInfo *pApplicationInfo;
    uint32_t enabledLayerCount;
    const char *const *ppEnabledLayerNames;
    uint32_t enabledExtensionCount;
    const char *const *ppEnabledExtensionNames;
} VkInstanceCreateInfo;
typedef struct VkPhysicalDeviceProperties {
    uint32_t apiVersion;
    uint32_t driverVersion;
    uint32_t vendorID;
    uint32_t deviceID;
    int deviceType;
    char deviceName[256];
    uint8_t pipelineCacheUUID[16];
    uint64_t limits[66]; /* VkPhysicalDeviceLimits and VkPhysicalDeviceSparseProperties: not read */
} VkPhysicalDeviceProperties;
typedef struct VkPhysicalDeviceProperties2 {
    VkStructureType sType;
    void *pNext;
    VkPhysicalDeviceProperties properties;
} VkPhysicalDeviceProperties2;
typedef struct VkPhysicalDeviceIDProperties {
    VkStructureType sType;
    void *pNext;
    uint8_t deviceUUID[16];
    uint8_t driverUUID[16];
    uint8_t deviceLUID[8];
    uint32_t deviceNodeMask;
    VkBool32 deviceLUIDValid;
} VkPhysicalDeviceIDProperties;
typedef struct VkPhysicalDeviceFeatures2 {
    VkStructureType sType;
    void *pNext;
    VkBool32 features[55]; /* VkPhysicalDeviceFeatures */
} VkPhysicalDeviceFeatures2;
typedef struct VkPhysicalDeviceTimelineSemaphoreFeatures {
    VkStructureType sType;
    void *pNext;
    VkBool32 timelineSemaphore;
} VkPhysicalDeviceTimelineSemaphoreFeatures;
typedef struct VkExtensionProperties {
    char extensionName[256];
    uint32_t specVersion;
} VkExtensionProperties;
typedef struct VkPhysicalDeviceExternalSemaphoreInfo {
    VkStructureType sType;
    const void *pNext;
    VkFlags handleType;
} VkPhysicalDeviceExternalSemaphoreInfo;
typedef struct VkExternalSemaphoreProperties {
    VkStructureType sType;
    void *pNext;
    VkFlags exportFromImportedHandleTypes;
    VkFlags compatibleHandleTypes;
    VkFlags externalSemaphoreFeatures;
} VkExternalSemaphoreProperties;
typedef struct VkPhysicalDeviceExternalBufferInfo {
    VkStructureType sType;
    const void *pNext;
    VkFlags flags;
    VkFlags usage;
    VkFlags handleType;
} VkPhysicalDeviceExternalBufferInfo;
typedef struct VkExternalMemoryProperties {
    VkFlags externalMemoryFeatures;
    VkFlags exportFromImportedHandleTypes;
    VkFlags compatibleHandleTypes;
} VkExternalMemoryProperties;
typedef struct VkExternalBufferProperties {
    VkStructureType sType;
    void *pNext;
    VkExternalMemoryProperties externalMemoryProperties;
} VkExternalBufferProperties;
typedef struct VkQueueFamilyProperties {
    VkFlags queueFlags;
    uint32_t queueCount;
    uint32_t timestampValidBits;
    uint32_t minImageTransferGranularity[3];
} VkQueueFamilyProperties;
typedef struct VkMemoryType {
    VkFlags propertyFlags;
    uint32_t heapIndex;
} VkMemoryType;
typedef struct VkMemoryHeap {
    VkDeviceSize size;
    VkFlags flags;
} VkMemoryHeap;
typedef struct VkPhysicalDeviceMemoryProperties {
    uint32_t memoryTypeCount;
    VkMemoryType memoryTypes[32];
    uint32_t memoryHeapCount;
    VkMemoryHeap memoryHeaps[16];
} VkPhysicalDeviceMemoryProperties;
typedef struct VkDeviceQueueCreateInfo {
    VkStructureType sType;
    const void *pNext;
    VkFlags flags;
    uint32_t queueFamilyIndex;
    uint32_t queueCount;
    const float *pQueuePriorities;
} VkDeviceQueueCreateInfo;
typedef struct VkDeviceCreateInfo {
    VkStructureType sType;
    const void *pNext;
    VkFlags flags;
    uint32_t queueCreateInfoCount;
    const VkDeviceQueueCreateInfo *pQueueCreateInfos;
    uint32_t enabledLayerCount;
    const char *const *ppEnabledLayerNames;
    uint32_t enabledExtensionCount;
    const char *const *ppEnabledExtensionNames;
    const void *pEnabledFeatures;
} VkDeviceCreateInfo;
typedef struct VkExportSemaphoreCreateInfo {
    VkStructureType sType;
    const void *pNext;
    VkFlags handleTypes;
} VkExportSemaphoreCreateInfo;
typedef struct VkSemaphoreCreateInfo {
    VkStructureType sType;
    const void *pNext;
    VkFlags flags;
} VkSemaphoreCreateInfo;
typedef struct VkSemaphoreGetFdInfoKHR {
    VkStructureType sType;
    const void *pNext;
    VkSemaphore semaphore;
    VkFlags handleType;
} VkSemaphoreGetFdInfoKHR;
typedef struct VkExternalMemoryBufferCreateInfo {
    VkStructureType sType;
    const void *pNext;
    VkFlags handleTypes;
} VkExternalMemoryBufferCreateInfo;
typedef struct VkBufferCreateInfo {
    VkStructureType sType;
    const void *pNext;
    VkFlags flags;
    VkDeviceSize size;
    VkFlags usage;
    int sharingMode;
    uint32_t queueFamilyIndexCount;
    const uint32_t *pQueueFamilyIndices;
} VkBufferCreateInfo;
typedef struct VkBufferMemoryRequirementsInfo2 {
    VkStructureType sType;
    const void *pNext;
    VkBuffer buffer;
} VkBufferMemoryRequirementsInfo2;
typedef struct VkMemoryRequirements {
    VkDeviceSize size;
    VkDeviceSize alignment;
    uint32_t memoryTypeBits;
} VkMemoryRequirements;
typedef struct VkMemoryRequirements2 {
    VkStructureType sType;
    void *pNext;
    VkMemoryRequirements memoryRequirements;
} VkMemoryRequirements2;
typedef struct VkMemoryDedicatedRequirements {
    VkStructureType sType;
    void *pNext;
    VkBool32 prefersDedicatedAllocation;
    VkBool32 requiresDedicatedAllocation;
} VkMemoryDedicatedRequirements;
typedef struct VkExportMemoryAllocateInfo {
    VkStructureType sType;
    const void *pNext;
    VkFlags handleTypes;
} VkExportMemoryAllocateInfo;
typedef struct VkMemoryDedicatedAllocateInfo {
    VkStructureType sType;
    const void *pNext;
    VkImage image;
    VkBuffer buffer;
} VkMemoryDedicatedAllocateInfo;
typedef struct VkMemoryAllocateInfo {
    VkStructureType sType;
    const void *pNext;
    VkDeviceSize allocationSize;
    uint32_t memoryTypeIndex;
} VkMemoryAllocateInfo;
typedef struct VkMemoryGetFdInfoKHR {
    VkStructureType sType;
    const void *pNext;
    VkDeviceMemory memory;
    VkFlags handleType;
} VkMemoryGetFdInfoKHR;
typedef void (*PFN_vkVoidFunction)(void);
typedef PFN_vkVoidFunction (*PFN_vkGetInstanceProcAddr)(VkInstance, const char *);
typedef PFN_vkVoidFunction (*PFN_vkGetDeviceProcAddr)(VkDevice, const char *);
typedef VkResult (*PFN_vkEnumerateInstanceVersion)(uint32_t *);
typedef VkResult (*PFN_vkCreateInstance)(const VkInstanceCreateInfo *, const VkAllocationCallbacks *, VkInstance *);
typedef VkResult (*PFN_vkEnumeratePhysicalDevices)(VkInstance, uint32_t *, VkPhysicalDevice *);
typedef void (*PFN_vkGetPhysicalDeviceProperties2)(VkPhysicalDevice, VkPhysicalDeviceProperties2 *);
typedef void (*PFN_vkGetPhysicalDeviceFeatures2)(VkPhysicalDevice, VkPhysicalDeviceFeatures2 *);
typedef VkResult (*PFN_vkEnumerateDeviceExtensionProperties)(VkPhysicalDevice, const char *, uint32_t *,
                                                             VkExtensionProperties *);
typedef void (*PFN_vkGetPhysicalDeviceExternalSemaphoreProperties)(VkPhysicalDevice,
                                                                   const VkPhysicalDeviceExternalSemaphoreInfo *,
                                                                   VkExternalSemaphoreProperties *);
typedef void (*PFN_vkGetPhysicalDeviceExternalBufferProperties)(VkPhysicalDevice,
                                                                const VkPhysicalDeviceExternalBufferInfo *,
                                                                VkExternalBufferProperties *);
typedef void (*PFN_vkGetPhysicalDeviceQueueFamilyProperties)(VkPhysicalDevice, uint32_t *, VkQueueFamilyProperties *);
typedef void (*PFN_vkGetPhysicalDeviceMemoryProperties)(VkPhysicalDevice, VkPhysicalDeviceMemoryProperties *);
typedef VkResult (*PFN_vkCreateDevice)(VkPhysicalDevice, const VkDeviceCreateInfo *, const VkAllocationCallbacks *,
                                       VkDevice *);
typedef void (*PFN_vkGetDeviceQueue)(VkDevice, uint32_t, uint32_t, VkQueue *);
typedef VkResult (*PFN_vkQueueWaitIdle)(VkQueue);
typedef VkResult (*PFN_vkCreateSemaphore)(VkDevice, const VkSemaphoreCreateInfo *, const VkAllocationCallbacks *,
                                          VkSemaphore *);
typedef void (*PFN_vkDestroySemaphore)(VkDevice, VkSemaphore, const VkAllocationCallbacks *);
typedef VkResult (*PFN_vkGetSemaphoreFdKHR)(VkDevice, const VkSemaphoreGetFdInfoKHR *, int *);
typedef VkResult (*PFN_vkCreateBuffer)(VkDevice, const VkBufferCreateInfo *, const VkAllocationCallbacks *, VkBuffer *);
typedef void (*PFN_vkDestroyBuffer)(VkDevice, VkBuffer, const VkAllocationCallbacks *);
typedef void (*PFN_vkGetBufferMemoryRequirements2)(VkDevice, const VkBufferMemoryRequirementsInfo2 *,
                                                   VkMemoryRequirements2 *);
typedef VkResult (*PFN_vkAllocateMemory)(VkDevice, const VkMemoryAllocateInfo *, const VkAllocationCallbacks *,
                                         VkDeviceMemory *);
typedef void (*PFN_vkFreeMemory)(VkDevice, VkDeviceMemory, const VkAllocationCallbacks *);
typedef VkResult (*PFN_vkBindBufferMemory)(VkDevice, VkBuffer, VkDeviceMemory, VkDeviceSize);
typedef VkResult (*PFN_vkGetMemoryFdKHR)(VkDevice, const VkMemoryGetFdInfoKHR *, int *);
#endif
#if UINTPTR_MAX == 0xFFFFFFFFFFFFFFFFu
/* The Vulkan headers' layouts on a 64-bit machine, as declared above. */
_Static_assert(sizeof(VkPhysicalDeviceProperties) == 824, "VkPhysicalDeviceProperties");
_Static_assert(sizeof(VkPhysicalDeviceFeatures2) == 240, "VkPhysicalDeviceFeatures2");
_Static_assert(sizeof(VkPhysicalDeviceMemoryProperties) == 520, "VkPhysicalDeviceMemoryProperties");
_Static_assert(sizeof(VkBufferCreateInfo) == 56, "VkBufferCreateInfo");
_Static_assert(sizeof(VkDeviceCreateInfo) == 72, "VkDeviceCreateInfo");
_Static_assert(sizeof(VkPhysicalDeviceIDProperties) == 64, "VkPhysicalDeviceIDProperties");
_Static_assert(sizeof(VkMemoryRequirements2) == 40, "VkMemoryRequirements2");
_Static_assert(sizeof(VkMemoryDedicatedAllocateInfo) == 32, "VkMemoryDedicatedAllocateInfo");
#endif

/* The broker: the loader, the instance, the device on the peer's GPU (by UUID) and its queue,
   and the functions it calls, each named as the loader names it. */
static struct {
    const char *loader;
    VkInstance instance;
    VkPhysicalDevice physical;
    VkDevice device;
    VkQueue queue;
    char name[256], uuid[40];
    int semaphores, memory, dedicated_only;
    VkPhysicalDeviceMemoryProperties memory_types;
    PFN_vkGetInstanceProcAddr vkGetInstanceProcAddr;
    PFN_vkGetDeviceProcAddr vkGetDeviceProcAddr;
    PFN_vkEnumeratePhysicalDevices vkEnumeratePhysicalDevices;
    PFN_vkGetPhysicalDeviceProperties2 vkGetPhysicalDeviceProperties2;
    PFN_vkGetPhysicalDeviceFeatures2 vkGetPhysicalDeviceFeatures2;
    PFN_vkEnumerateDeviceExtensionProperties vkEnumerateDeviceExtensionProperties;
    PFN_vkGetPhysicalDeviceExternalSemaphoreProperties vkGetPhysicalDeviceExternalSemaphoreProperties;
    PFN_vkGetPhysicalDeviceExternalBufferProperties vkGetPhysicalDeviceExternalBufferProperties;
    PFN_vkGetPhysicalDeviceQueueFamilyProperties vkGetPhysicalDeviceQueueFamilyProperties;
    PFN_vkGetPhysicalDeviceMemoryProperties vkGetPhysicalDeviceMemoryProperties;
    PFN_vkCreateDevice vkCreateDevice;
    PFN_vkGetDeviceQueue vkGetDeviceQueue;
    PFN_vkQueueWaitIdle vkQueueWaitIdle;
    PFN_vkCreateSemaphore vkCreateSemaphore;
    PFN_vkDestroySemaphore vkDestroySemaphore;
    PFN_vkGetSemaphoreFdKHR vkGetSemaphoreFdKHR;
    PFN_vkCreateBuffer vkCreateBuffer;
    PFN_vkDestroyBuffer vkDestroyBuffer;
    PFN_vkGetBufferMemoryRequirements2 vkGetBufferMemoryRequirements2;
    PFN_vkAllocateMemory vkAllocateMemory;
    PFN_vkFreeMemory vkFreeMemory;
    PFN_vkBindBufferMemory vkBindBufferMemory;
    PFN_vkGetMemoryFdKHR vkGetMemoryFdKHR;
} vk;

/* Every reason the broker cannot serve is clhip's `unsupported` (2), in its words. */
static void vk_refused(const char *why)
{
    printf("UNSUPPORTED: Vulkan broker: %s\n", why);
    finish(2);
}

/* A VkResult by its name in vulkan_core.h, as clhip's reasons give it. */
static const char *vk_result_name(VkResult r)
{
    switch ((int)r) {
    case -1: return "VK_ERROR_OUT_OF_HOST_MEMORY";
    case -2: return "VK_ERROR_OUT_OF_DEVICE_MEMORY";
    case -3: return "VK_ERROR_INITIALIZATION_FAILED";
    case -4: return "VK_ERROR_DEVICE_LOST";
    case -7: return "VK_ERROR_EXTENSION_NOT_PRESENT";
    case -8: return "VK_ERROR_FEATURE_NOT_PRESENT";
    case -9: return "VK_ERROR_INCOMPATIBLE_DRIVER";
    case -13: return "VK_ERROR_UNKNOWN";
    case -1000072003: return "VK_ERROR_INVALID_EXTERNAL_HANDLE";
    default: return "a VkResult (vulkan_core.h names its code)";
    }
}

/* A refused call in clhip's words (`vkCreateInstance returned VK_ERROR_... (code)`): the
   function's name, from the call's text up to its `(` after any `vk.`, then the line. */
static void vk_check(VkResult r, const char *call, int line)
{
    char why[512], name[128];
    const char *dot;
    size_t len = strcspn(call, "(");
    if (r == VK_SUCCESS)
        return;
    snprintf(name, sizeof name, "%.*s", (int)len, call);
    if ((dot = strrchr(name, '.')))
        memmove(name, dot + 1, strlen(dot));
    snprintf(why, sizeof why, "%s returned %s (%d) (line %d: %s)", name, vk_result_name(r), (int)r, line, call);
    vk_refused(why);
}
#define VK(call) (said(#call), vk_check((call), #call, __LINE__))

/* A function of the instance (device 0) or of the device, by the loader's name for it. */
static PFN_vkVoidFunction vk_function(const char *name, int of_device)
{
    PFN_vkVoidFunction f = of_device ? vk.vkGetDeviceProcAddr(vk.device, name) : vk.vkGetInstanceProcAddr(vk.instance, name);
    char why[300];
    if (!f) {
        snprintf(why, sizeof why, "the loader (%s) has no %s", vk.loader, name);
        vk_refused(why);
    }
    return f;
}
#define VK_LOAD(name, of_device) (vk.name = (PFN_##name)vk_function(#name, of_device))

static int vk_has(const VkExtensionProperties *exts, uint32_t n, const char *name)
{
    for (uint32_t i = 0; i < n; i++)
        if (strcmp(exts[i].extensionName, name) == 0)
            return 1;
    return 0;
}

/* Opens the broker once (Broker::open): the loader (libvulkan.so.1, then libvulkan.so), an
   instance of Vulkan 1.1 or later, the physical device whose deviceUUID is the peer's GPU's,
   and on it a device with VK_KHR_external_semaphore_fd and VK_KHR_external_memory_fd, each
   where it exports what the extension is for, and timeline semaphores where it has them. A
   worker opens its broker once and keeps it; so the calls are in the `open` scope. */
static void vk_open(void)
{
    static const char *candidates[2] = {"libvulkan.so.1", "libvulkan.so"};
    char tried[1024] = "", why[2048], seen[1024] = "";
    unsigned char want[16];
    void *lib = NULL;
    uint32_t version = 0, n = 0, families = 0, next = 0;
    VkPhysicalDevice *devices;
    VkExtensionProperties *exts = NULL;
    VkPhysicalDeviceIDProperties id;
    VkPhysicalDeviceProperties2 props;
    VkPhysicalDeviceTimelineSemaphoreFeatures timeline;
    VkPhysicalDeviceFeatures2 features;
    VkQueueFamilyProperties family_props[64];
    const char *extensions[3];
    int api = 0, timeline_ok = 0, family = -1;
    if (vk.device)
        return;
    call_scope = "open";
    peer_uuid(want);
    for (int i = 0; i < 2 && !lib; i++)
        if (!(lib = dlopen(candidates[i], RTLD_NOW | RTLD_LOCAL)))
            snprintf(tried + strlen(tried), sizeof tried - strlen(tried), "%s%s: %s", i ? "; " : "", candidates[i],
                     dlerror());
        else
            vk.loader = candidates[i];
    if (!lib) {
        snprintf(why, sizeof why, "no Vulkan loader: libvulkan.so.1 not found (tried %s)", tried);
        vk_refused(why);
    }
    if (!(vk.vkGetInstanceProcAddr = (PFN_vkGetInstanceProcAddr)dlsym(lib, "vkGetInstanceProcAddr"))) {
        snprintf(why, sizeof why, "no Vulkan loader: %s has no vkGetInstanceProcAddr", vk.loader);
        vk_refused(why);
    }
    {
        /* Named as the functions, so that a refusal names the call as clhip does. */
        PFN_vkEnumerateInstanceVersion vkEnumerateInstanceVersion =
            (PFN_vkEnumerateInstanceVersion)vk.vkGetInstanceProcAddr(NULL, "vkEnumerateInstanceVersion");
        PFN_vkCreateInstance vkCreateInstance = (PFN_vkCreateInstance)vk_function("vkCreateInstance", 0);
        VkApplicationInfo app = {VK_STRUCTURE_TYPE_APPLICATION_INFO, NULL, "clhip", 0, NULL, 0, 0};
        VkInstanceCreateInfo info = {VK_STRUCTURE_TYPE_INSTANCE_CREATE_INFO, NULL, 0, &app, 0, NULL, 0, NULL};
        version = 1u << 22; /* 1.0, when the loader cannot say */
        if (vkEnumerateInstanceVersion)
            VK(vkEnumerateInstanceVersion(&version));
        if (version < VK_API_VERSION_1_1) {
            snprintf(why, sizeof why, "the loader is Vulkan %u.%u.%u: external memory and semaphore queries need 1.1",
                     version >> 22 & 0x7F, version >> 12 & 0x3FF, version & 0xFFF);
            vk_refused(why);
        }
        app.apiVersion = version < VK_API_VERSION_1_2 ? version : VK_API_VERSION_1_2;
        VK(vkCreateInstance(&info, NULL, &vk.instance));
    }
    VK_LOAD(vkEnumeratePhysicalDevices, 0);
    VK_LOAD(vkGetPhysicalDeviceProperties2, 0);
    VK_LOAD(vkGetPhysicalDeviceFeatures2, 0);
    VK_LOAD(vkEnumerateDeviceExtensionProperties, 0);
    VK_LOAD(vkGetPhysicalDeviceExternalSemaphoreProperties, 0);
    VK_LOAD(vkGetPhysicalDeviceExternalBufferProperties, 0);
    VK_LOAD(vkGetPhysicalDeviceQueueFamilyProperties, 0);
    VK_LOAD(vkGetPhysicalDeviceMemoryProperties, 0);
    VK_LOAD(vkCreateDevice, 0);
    VK_LOAD(vkGetDeviceProcAddr, 0);
    VK(vk.vkEnumeratePhysicalDevices(vk.instance, &n, NULL));
    devices = calloc(n ? n : 1, sizeof *devices);
    VK(vk.vkEnumeratePhysicalDevices(vk.instance, &n, devices));
    if (n == 0) {
        snprintf(why, sizeof why, "the loader (%s) found no physical device: no Vulkan driver (ICD) answered (see "
                 "VK_DRIVER_FILES, VK_ICD_FILENAMES, VK_ADD_DRIVER_FILES and /usr/share/vulkan/icd.d)", vk.loader);
        vk_refused(why);
    }
    for (uint32_t d = 0; d < n && !vk.physical; d++) {
        char uuid[40];
        memset(&id, 0, sizeof id);
        memset(&props, 0, sizeof props);
        id.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_ID_PROPERTIES;
        props.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PROPERTIES_2;
        props.pNext = &id;
        vk.vkGetPhysicalDeviceProperties2(devices[d], &props);
        for (int i = 0, at = 0; i < 16; i++)
            at += sprintf(uuid + at, "%s%02x", i == 4 || i == 6 || i == 8 || i == 10 ? "-" : "", id.deviceUUID[i]);
        snprintf(seen + strlen(seen), sizeof seen - strlen(seen), "%s%s (%s)", d ? ", " : "",
                 props.properties.deviceName, uuid);
        if (memcmp(id.deviceUUID, want, 16) == 0) {
            vk.physical = devices[d];
            api = (int)props.properties.apiVersion;
            snprintf(vk.name, sizeof vk.name, "%s", props.properties.deviceName);
            snprintf(vk.uuid, sizeof vk.uuid, "%s", uuid);
        }
    }
    if (!vk.physical) {
        char uuid[40];
        for (int i = 0, at = 0; i < 16; i++)
            at += sprintf(uuid + at, "%s%02x", i == 4 || i == 6 || i == 8 || i == 10 ? "-" : "", want[i]);
        snprintf(why, sizeof why, "no Vulkan device has the GPU's UUID %s (Vulkan sees %s)", uuid, seen);
        vk_refused(why);
    }
    if ((uint32_t)api < VK_API_VERSION_1_1) {
        snprintf(why, sizeof why, "%s (%s): a Vulkan 1.0 device: external memory and semaphores need 1.1", vk.name, vk.uuid);
        vk_refused(why);
    }
    VK(vk.vkEnumerateDeviceExtensionProperties(vk.physical, NULL, &n, NULL));
    exts = calloc(n ? n : 1, sizeof *exts);
    VK(vk.vkEnumerateDeviceExtensionProperties(vk.physical, NULL, &n, exts));
    {
        /* What the device exports as an opaque fd (survey.rs exports). */
        VkPhysicalDeviceExternalSemaphoreInfo sem_info = {VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_EXTERNAL_SEMAPHORE_INFO, NULL,
                                                          VK_EXTERNAL_SEMAPHORE_HANDLE_TYPE_OPAQUE_FD_BIT};
        VkExternalSemaphoreProperties sem = {VK_STRUCTURE_TYPE_EXTERNAL_SEMAPHORE_PROPERTIES, NULL, 0, 0, 0};
        VkPhysicalDeviceExternalBufferInfo buf_info = {
            VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_EXTERNAL_BUFFER_INFO, NULL, 0,
            VK_BUFFER_USAGE_STORAGE_BUFFER_BIT | VK_BUFFER_USAGE_TRANSFER_SRC_BIT | VK_BUFFER_USAGE_TRANSFER_DST_BIT,
            VK_EXTERNAL_MEMORY_HANDLE_TYPE_OPAQUE_FD_BIT};
        VkExternalBufferProperties buf = {VK_STRUCTURE_TYPE_EXTERNAL_BUFFER_PROPERTIES, NULL, {0, 0, 0}};
        vk.vkGetPhysicalDeviceExternalSemaphoreProperties(vk.physical, &sem_info, &sem);
        vk.vkGetPhysicalDeviceExternalBufferProperties(vk.physical, &buf_info, &buf);
        vk.semaphores = vk_has(exts, n, "VK_KHR_external_semaphore_fd") &&
                        (sem.externalSemaphoreFeatures & VK_EXTERNAL_SEMAPHORE_FEATURE_EXPORTABLE_BIT);
        vk.memory = vk_has(exts, n, "VK_KHR_external_memory_fd") &&
                    (buf.externalMemoryProperties.externalMemoryFeatures & VK_EXTERNAL_MEMORY_FEATURE_EXPORTABLE_BIT);
        vk.dedicated_only =
            !!(buf.externalMemoryProperties.externalMemoryFeatures & VK_EXTERNAL_MEMORY_FEATURE_DEDICATED_ONLY_BIT);
    }
    if (!vk.semaphores && !vk.memory) {
        snprintf(why, sizeof why, "%s (%s): exports neither a binary semaphore nor storage-buffer memory as an opaque fd",
                 vk.name, vk.uuid);
        vk_refused(why);
    }
    if ((uint32_t)api >= VK_API_VERSION_1_2 || vk_has(exts, n, "VK_KHR_timeline_semaphore")) {
        memset(&timeline, 0, sizeof timeline);
        memset(&features, 0, sizeof features);
        timeline.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_TIMELINE_SEMAPHORE_FEATURES;
        features.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2;
        features.pNext = &timeline;
        vk.vkGetPhysicalDeviceFeatures2(vk.physical, &features);
        timeline_ok = timeline.timelineSemaphore != 0;
    }
    /* Any queue can signal a semaphore; one that also copies is a natural choice. */
    families = 64;
    vk.vkGetPhysicalDeviceQueueFamilyProperties(vk.physical, &families, family_props);
    for (uint32_t f = 0; f < families && family < 0; f++)
        if (family_props[f].queueCount > 0 && (family_props[f].queueFlags & VK_QUEUE_TRANSFER_BIT))
            family = (int)f;
    for (uint32_t f = 0; f < families && family < 0; f++)
        if (family_props[f].queueCount > 0)
            family = (int)f;
    if (family < 0) {
        snprintf(why, sizeof why, "%s has no queue family", vk.name);
        vk_refused(why);
    }
    if (vk.semaphores)
        extensions[next++] = "VK_KHR_external_semaphore_fd";
    if (vk.memory)
        extensions[next++] = "VK_KHR_external_memory_fd";
    if (timeline_ok && (uint32_t)api < VK_API_VERSION_1_2)
        extensions[next++] = "VK_KHR_timeline_semaphore";
    {
        float priority = 1.0f;
        VkDeviceQueueCreateInfo queue = {VK_STRUCTURE_TYPE_DEVICE_QUEUE_CREATE_INFO, NULL, 0, (uint32_t)family, 1,
                                         &priority};
        VkDeviceCreateInfo info = {VK_STRUCTURE_TYPE_DEVICE_CREATE_INFO, NULL, 0, 1, &queue, 0, NULL, next, extensions,
                                   NULL};
        memset(&timeline, 0, sizeof timeline);
        timeline.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_TIMELINE_SEMAPHORE_FEATURES;
        timeline.timelineSemaphore = 1;
        if (timeline_ok)
            info.pNext = &timeline;
        VK(vk.vkCreateDevice(vk.physical, &info, NULL, &vk.device));
        VK_LOAD(vkGetDeviceQueue, 1);
        vk.vkGetDeviceQueue(vk.device, (uint32_t)family, 0, &vk.queue);
    }
    vk.vkGetPhysicalDeviceMemoryProperties(vk.physical, &vk.memory_types);
    VK_LOAD(vkQueueWaitIdle, 1);
    VK_LOAD(vkCreateSemaphore, 1);
    VK_LOAD(vkDestroySemaphore, 1);
    VK_LOAD(vkCreateBuffer, 1);
    VK_LOAD(vkDestroyBuffer, 1);
    VK_LOAD(vkGetBufferMemoryRequirements2, 1);
    VK_LOAD(vkAllocateMemory, 1);
    VK_LOAD(vkFreeMemory, 1);
    VK_LOAD(vkBindBufferMemory, 1);
    if (vk.semaphores)
        VK_LOAD(vkGetSemaphoreFdKHR, 1);
    if (vk.memory)
        VK_LOAD(vkGetMemoryFdKHR, 1);
    free(devices), free(exts);
    call_scope = NULL;
}

/* Why the broker's device cannot export `what` (a semaphore, memory), when it cannot. */
static void vk_exports(int exports, const char *extension, const char *what)
{
    char why[600];
    if (exports)
        return;
    snprintf(why, sizeof why, "%s (%s): lacks %s, or exports no %s as an opaque fd", vk.name, vk.uuid, extension, what);
    vk_refused(why);
}
/*@ vk_semaphore @*/
/* A binary semaphore exportable as an opaque fd (Broker::semaphore). */
static VkSemaphore vk_semaphore(void)
{
    VkExportSemaphoreCreateInfo export = {VK_STRUCTURE_TYPE_EXPORT_SEMAPHORE_CREATE_INFO, NULL,
                                          VK_EXTERNAL_SEMAPHORE_HANDLE_TYPE_OPAQUE_FD_BIT};
    VkSemaphoreCreateInfo info = {VK_STRUCTURE_TYPE_SEMAPHORE_CREATE_INFO, &export, 0};
    VkSemaphore sem;
    vk_exports(vk.semaphores, "VK_KHR_external_semaphore_fd", "binary semaphore");
    VK(vk.vkCreateSemaphore(vk.device, &info, NULL, &sem));
    return sem;
}

/* A fresh opaque fd of the semaphore's payload, for one importer. */
static int vk_semaphore_fd(VkSemaphore sem)
{
    VkSemaphoreGetFdInfoKHR info = {VK_STRUCTURE_TYPE_SEMAPHORE_GET_FD_INFO_KHR, NULL, sem,
                                    VK_EXTERNAL_SEMAPHORE_HANDLE_TYPE_OPAQUE_FD_BIT};
    int fd = -1;
    VK(vk.vkGetSemaphoreFdKHR(vk.device, &info, &fd));
    if (fd < 0)
        vk_refused("vkGetSemaphoreFdKHR gave no fd");
    return fd;
}

/* The broker's semaphore goes once nothing of its queue waits on or signals it. */
static void vk_destroy_semaphore(VkSemaphore sem)
{
    VK(vk.vkQueueWaitIdle(vk.queue));
    CALL(vk.vkDestroySemaphore(vk.device, sem, NULL));
}
/*@ vk_memory @*/
/* A storage buffer over memory allocated exportable as an opaque fd (Broker::memory):
   device-local memory where the buffer may live there, a dedicated allocation where the driver
   asks for one (an importer must then say so). */
struct vk_memory {
    VkBuffer buffer;
    VkDeviceMemory memory;
    VkDeviceSize size;
    int dedicated;
};

static void vk_memory(struct vk_memory *m, VkDeviceSize bytes)
{
    VkExternalMemoryBufferCreateInfo external = {VK_STRUCTURE_TYPE_EXTERNAL_MEMORY_BUFFER_CREATE_INFO, NULL,
                                                 VK_EXTERNAL_MEMORY_HANDLE_TYPE_OPAQUE_FD_BIT};
    VkBufferCreateInfo info = {
        VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO, &external, 0, bytes ? bytes : 1,
        VK_BUFFER_USAGE_STORAGE_BUFFER_BIT | VK_BUFFER_USAGE_TRANSFER_SRC_BIT | VK_BUFFER_USAGE_TRANSFER_DST_BIT,
        VK_SHARING_MODE_EXCLUSIVE, 0, NULL};
    VkMemoryDedicatedRequirements dedicated = {VK_STRUCTURE_TYPE_MEMORY_DEDICATED_REQUIREMENTS, NULL, 0, 0};
    VkMemoryRequirements2 req = {VK_STRUCTURE_TYPE_MEMORY_REQUIREMENTS_2, &dedicated, {0, 0, 0}};
    VkBufferMemoryRequirementsInfo2 query = {VK_STRUCTURE_TYPE_BUFFER_MEMORY_REQUIREMENTS_INFO_2, NULL, NULL};
    VkExportMemoryAllocateInfo export = {VK_STRUCTURE_TYPE_EXPORT_MEMORY_ALLOCATE_INFO, NULL,
                                         VK_EXTERNAL_MEMORY_HANDLE_TYPE_OPAQUE_FD_BIT};
    VkMemoryDedicatedAllocateInfo dedicated_info = {VK_STRUCTURE_TYPE_MEMORY_DEDICATED_ALLOCATE_INFO, NULL, NULL, NULL};
    VkMemoryAllocateInfo alloc = {VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO, &export, 0, 0};
    const VkPhysicalDeviceMemoryProperties *types = &vk.memory_types;
    int type = -1;
    vk_exports(vk.memory, "VK_KHR_external_memory_fd", "storage-buffer memory");
    VK(vk.vkCreateBuffer(vk.device, &info, NULL, &m->buffer));
    query.buffer = m->buffer;
    CALL(vk.vkGetBufferMemoryRequirements2(vk.device, &query, &req));
    m->dedicated = dedicated.requiresDedicatedAllocation || dedicated.prefersDedicatedAllocation || vk.dedicated_only;
    /* Device-local where the buffer may be there (survey.rs memory_type), else the first it may. */
    for (uint32_t i = 0; i < types->memoryTypeCount && type < 0; i++)
        if ((req.memoryRequirements.memoryTypeBits >> i & 1) &&
            (types->memoryTypes[i].propertyFlags & VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT))
            type = (int)i;
    for (uint32_t i = 0; i < types->memoryTypeCount && type < 0; i++)
        if (req.memoryRequirements.memoryTypeBits >> i & 1)
            type = (int)i;
    if (type < 0)
        vk_refused("no memory type takes the buffer");
    alloc.allocationSize = m->size = req.memoryRequirements.size;
    alloc.memoryTypeIndex = (uint32_t)type;
    if (m->dedicated) {
        dedicated_info.buffer = m->buffer;
        export.pNext = &dedicated_info;
    }
    VK(vk.vkAllocateMemory(vk.device, &alloc, NULL, &m->memory));
    VK(vk.vkBindBufferMemory(vk.device, m->buffer, m->memory, 0));
}

/* A fresh opaque fd of the memory, for one importer. */
static int vk_memory_fd(const struct vk_memory *m)
{
    VkMemoryGetFdInfoKHR info = {VK_STRUCTURE_TYPE_MEMORY_GET_FD_INFO_KHR, NULL, m->memory,
                                 VK_EXTERNAL_MEMORY_HANDLE_TYPE_OPAQUE_FD_BIT};
    int fd = -1;
    VK(vk.vkGetMemoryFdKHR(vk.device, &info, &fd));
    if (fd < 0)
        vk_refused("vkGetMemoryFdKHR gave no fd");
    return fd;
}

/* The broker's buffer and memory go last, after both importers let go. */
static void vk_free_memory(const struct vk_memory *m)
{
    CALL(vk.vkDestroyBuffer(vk.device, m->buffer, NULL));
    CALL(vk.vkFreeMemory(vk.device, m->memory, NULL));
}
/*@ semaphore @*/
/* One direction's binary semaphore: the broker's, and OpenCL's and the peer's imports of it,
   each through an opaque fd of its own. */
struct link_dir {
    VkSemaphore vk;
    cl_semaphore_khr cl;
    peer_semaphore peer;
};

/* The semaphores that order one allocation's handovers (sync.rs SemaphoreLink): one per
   direction, so that a wait never takes its own side's signal (sync.rs says why), made at the
   memory's first semaphore handover. */
struct link {
    int made;
    struct link_dir to_peer, to_cl;
};

static void link_dir_make(struct link_dir *d)
{
    d->vk = vk_semaphore();
    d->peer = peer_import_semaphore(vk_semaphore_fd(d->vk));
    d->cl = cl_import_semaphore(vk_semaphore_fd(d->vk));
}

/* OpenCL's extensions checked, the broker opened, both directions' semaphores made. */
static void link_open(struct link *l)
{
    static const char *exts[2] = {"cl_khr_external_semaphore", "cl_khr_external_semaphore_opaque_fd"};
    if (l->made)
        return;
    for (int i = 0; i < 2; i++)
        if (!has_extension(exts[i])) {
            printf("UNSUPPORTED: the OpenCL device lacks %s, so it cannot import the Vulkan broker's semaphore\n",
                   exts[i]);
            finish(2);
        }
    vk_open();
    link_dir_make(&l->to_peer);
    link_dir_make(&l->to_cl);
    l->made = 1;
}

/* OpenCL to the peer (sync.rs semaphore_to_peer): imported memory released, OpenCL's signal
   after its work (and the release), a flush so the signal reaches the device, and the peer's
   stream waiting for it. No host wait. */
static void semaphore_to_peer(struct link *l, cl_mem imported, cl_uint nwait, const cl_event *wait)
{
    cl_event released, signalled;
    if (imported) {
        released = release_external(imported, nwait, wait);
        nwait = 1, wait = &released;
    }
    link_open(l);
    CHECK_AS(CL, "clEnqueueSignalSemaphoresKHR",
             cl_sem.signal(queue, 1, &l->to_peer.cl, NULL, nwait, nwait ? wait : NULL, &signalled));
    CHECK(CL, clFlush(queue));
    peer_wait_semaphore(l->to_peer.peer);
}

/* The peer to OpenCL (sync.rs semaphore_to_cl): the peer's stream signals after its work,
   OpenCL's queue waits, imported memory is acquired after the wait; the event OpenCL's next
   command waits on. No host wait. */
static cl_event semaphore_to_cl(struct link *l, cl_mem imported)
{
    cl_event waited;
    link_open(l);
    peer_signal_semaphore(l->to_cl.peer);
    CHECK_AS(CL, "clEnqueueWaitSemaphoresKHR", cl_sem.wait(queue, 1, &l->to_cl.cl, NULL, 0, NULL, &waited));
    return imported ? acquire_external(imported, 1, &waited) : waited;
}

/* Both sides idle: every import, then the broker's semaphores. */
static void link_release(struct link *l)
{
    struct link_dir *dirs[2] = {&l->to_peer, &l->to_cl};
    if (!l->made)
        return;
    for (int i = 0; i < 2; i++) {
        CHECK_AS(CL, "clReleaseSemaphoreKHR", cl_sem.release(dirs[i]->cl));
        peer_destroy_semaphore(dirs[i]->peer);
        vk_destroy_semaphore(dirs[i]->vk);
    }
}
/*@ end @*/
