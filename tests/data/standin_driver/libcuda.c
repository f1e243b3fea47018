/* A stand-in for the CUDA driver (libcuda.so.1), for the fork-safety tests on machines
 * without NVIDIA's driver.  It keeps the one piece of state those tests are about:
 * whether cuInit ran in this process.  Like the real driver, cuDeviceGetCount answers
 * CUDA_ERROR_NOT_INITIALIZED (3) before cuInit; after it, no devices.  cuGetProcAddress
 * hands out these entry points, which is how CUDA 12 and 13 runtimes (torch's CUDA
 * builds) reach the driver: torch.cuda.is_available() then calls cuInit here.
 * STANDIN_DRIVER_LOG=1 prints each call on stderr. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CUDA_SUCCESS 0
#define CUDA_ERROR_NOT_INITIALIZED 3
#define CUDA_ERROR_NOT_FOUND 500

static int initialised = 0;

static void say(const char *what) {
    if (getenv("STANDIN_DRIVER_LOG")) fprintf(stderr, "[stand-in driver] %s\n", what);
}

int cuInit(unsigned int flags) {
    (void)flags;
    say("cuInit");
    initialised = 1;
    return CUDA_SUCCESS;
}

int cuDriverGetVersion(int *version) {
    say("cuDriverGetVersion");
    *version = 13000;
    return CUDA_SUCCESS;
}

int cuDeviceGetCount(int *count) {
    say("cuDeviceGetCount");
    if (!initialised) return CUDA_ERROR_NOT_INITIALIZED;
    *count = 0;
    return CUDA_SUCCESS;
}

int cuGetProcAddress_v2(const char *symbol, void **pfn, int version, unsigned long long flags, int *status) {
    (void)version;
    (void)flags;
    *pfn = 0;
    if (!strcmp(symbol, "cuInit")) *pfn = (void *)cuInit;
    else if (!strcmp(symbol, "cuDriverGetVersion")) *pfn = (void *)cuDriverGetVersion;
    else if (!strcmp(symbol, "cuDeviceGetCount")) *pfn = (void *)cuDeviceGetCount;
    else if (!strcmp(symbol, "cuGetProcAddress")) *pfn = (void *)cuGetProcAddress_v2;
    if (status) *status = *pfn ? 0 : 1;
    return *pfn ? CUDA_SUCCESS : CUDA_ERROR_NOT_FOUND;
}

int cuGetProcAddress(const char *symbol, void **pfn, int version, unsigned long long flags) {
    return cuGetProcAddress_v2(symbol, pfn, version, flags, 0);
}
