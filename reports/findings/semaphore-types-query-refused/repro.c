/*
 * cl_khr_semaphore's type queries on every OpenCL device that lists the extension.
 *
 * cl_khr_semaphore (OpenCL 3.0 extension specification) adds CL_PLATFORM_SEMAPHORE_TYPES_KHR
 * (0x2036) to clGetPlatformInfo and CL_DEVICE_SEMAPHORE_TYPES_KHR (0x204C) to clGetDeviceInfo:
 * the semaphore types (CL_SEMAPHORE_TYPE_BINARY_KHR, 1) the platform and the device support.
 * A device that lists cl_khr_semaphore must answer both.
 *
 * Written by hand for docs/findings.md: clhip's probe found it (`semaphore types  error:
 * CL_INVALID_VALUE (-30)`), and no case's outcome rests on the answer, so `clhip repro` has no
 * case to write it from.
 *
 * Exit 0: every such device answers both; 1: a query is refused (the defect); 2: no device
 * lists cl_khr_semaphore, or OpenCL is missing.
 */
#define CL_TARGET_OPENCL_VERSION 300
#include <CL/cl.h>
#include <stdio.h>
#include <string.h>

#define PLATFORM_SEMAPHORE_TYPES 0x2036 /* CL_PLATFORM_SEMAPHORE_TYPES_KHR */
#define DEVICE_SEMAPHORE_TYPES 0x204C   /* CL_DEVICE_SEMAPHORE_TYPES_KHR */

static const char *name(cl_int e)
{
    return e == CL_SUCCESS ? "CL_SUCCESS" : e == CL_INVALID_VALUE ? "CL_INVALID_VALUE" : "an error";
}

/* The types in a query's answer, or the error; 1 if the query was refused. */
static int show(const char *what, cl_int err, const cl_uint *types, size_t bytes)
{
    printf("  %s: %s (%d)", what, name(err), err);
    if (err == CL_SUCCESS) {
        printf(", %zu type(s):", bytes / sizeof(cl_uint));
        for (size_t i = 0; i < bytes / sizeof(cl_uint); i++)
            printf(" %u%s", types[i], types[i] == 1 ? " (CL_SEMAPHORE_TYPE_BINARY_KHR)" : "");
    }
    printf("\n");
    return err != CL_SUCCESS;
}

int main(void)
{
    cl_platform_id platforms[16];
    cl_uint np = 0, listed = 0;
    int refused = 0;
    if (clGetPlatformIDs(16, platforms, &np) != CL_SUCCESS || np == 0) {
        puts("ERROR: no OpenCL platform");
        return 2;
    }
    for (cl_uint p = 0; p < np; p++) {
        char pname[256] = "", pversion[256] = "";
        cl_device_id devices[16];
        cl_uint nd = 0;
        clGetPlatformInfo(platforms[p], CL_PLATFORM_NAME, sizeof pname, pname, NULL);
        clGetPlatformInfo(platforms[p], CL_PLATFORM_VERSION, sizeof pversion, pversion, NULL);
        if (clGetDeviceIDs(platforms[p], CL_DEVICE_TYPE_ALL, 16, devices, &nd) != CL_SUCCESS)
            continue;
        for (cl_uint d = 0; d < nd; d++) {
            static char extensions[16384];
            char dname[256] = "", driver[256] = "";
            cl_uint types[16];
            size_t bytes = 0;
            cl_int err;
            clGetDeviceInfo(devices[d], CL_DEVICE_NAME, sizeof dname, dname, NULL);
            clGetDeviceInfo(devices[d], CL_DRIVER_VERSION, sizeof driver, driver, NULL);
            extensions[0] = 0;
            clGetDeviceInfo(devices[d], CL_DEVICE_EXTENSIONS, sizeof extensions, extensions, NULL);
            int lists = strstr(extensions, "cl_khr_semaphore ") != NULL ||
                        (strlen(extensions) >= 16 && strcmp(extensions + strlen(extensions) - 16, "cl_khr_semaphore") == 0);
            printf("%s (%s), %s, driver %s: %s cl_khr_semaphore\n", pname, pversion, dname, driver,
                   lists ? "lists" : "does not list");
            if (!lists)
                continue;
            listed++;
            err = clGetPlatformInfo(platforms[p], PLATFORM_SEMAPHORE_TYPES, sizeof types, types, &bytes);
            refused |= show("clGetPlatformInfo(CL_PLATFORM_SEMAPHORE_TYPES_KHR)", err, types, bytes);
            bytes = 0;
            err = clGetDeviceInfo(devices[d], DEVICE_SEMAPHORE_TYPES, sizeof types, types, &bytes);
            refused |= show("clGetDeviceInfo(CL_DEVICE_SEMAPHORE_TYPES_KHR)", err, types, bytes);
        }
    }
    if (!listed) {
        puts("UNSUPPORTED: no device lists cl_khr_semaphore");
        return 2;
    }
    puts(refused ? "FAIL: a device that lists cl_khr_semaphore refuses its semaphore type query"
                 : "PASS: every device that lists cl_khr_semaphore answers both queries");
    return refused;
}
