/*
 * cuda_types.h - the few CUDA driver API types and codes the interposer and
 * the stub driver need, declared here so that neither needs the CUDA
 * headers (the CI machine has none). Values and layouts are those of
 * cuda.h (CUDA 11.x to 13.0, 64-bit); only what is used is declared.
 */
#ifndef CRATER_GPUSLICE_CUDA_TYPES_H
#define CRATER_GPUSLICE_CUDA_TYPES_H

#include <stddef.h>

typedef int CUresult;
typedef int CUdevice;
typedef unsigned long long CUdeviceptr;
typedef unsigned long long CUmemGenericAllocationHandle;
typedef unsigned long long cuuint64_t;
typedef struct CUctx_st *CUcontext;
typedef struct CUstream_st *CUstream;
typedef struct CUmemPoolHandle_st *CUmemoryPool;
typedef struct CUuuid_st {
    char bytes[16];
} CUuuid;

/* CUmemAllocationProp: only location is read. */
typedef struct CUmemLocation_st {
    int type; /* CU_MEM_LOCATION_TYPE_DEVICE = 1 */
    int id;   /* device ordinal when type is DEVICE */
} CUmemLocation;
typedef struct CUmemAllocationProp_st {
    int type; /* CU_MEM_ALLOCATION_TYPE_PINNED = 1 */
    int requestedHandleTypes;
    CUmemLocation location;
    void *win32HandleMetaData;
    struct {
        unsigned char compressionType;
        unsigned char gpuDirectRDMACapable;
        unsigned short usage;
        unsigned char reserved[4];
    } allocFlags;
} CUmemAllocationProp;

enum {
    CUDA_SUCCESS = 0,
    CUDA_ERROR_INVALID_VALUE = 1,
    CUDA_ERROR_OUT_OF_MEMORY = 2,
    CUDA_ERROR_NOT_INITIALIZED = 3,
    CUDA_ERROR_INVALID_DEVICE = 101,
    CUDA_ERROR_INVALID_CONTEXT = 201,
    CUDA_ERROR_INVALID_HANDLE = 400,
    CUDA_ERROR_NOT_FOUND = 500,
};

enum {
    CU_MEM_LOCATION_TYPE_DEVICE = 1,
    CU_MEM_ALLOCATION_TYPE_PINNED = 1,
    CU_MEM_ATTACH_GLOBAL = 1,
    CU_MEM_ATTACH_HOST = 2,
};

/* cuGetProcAddress flags and symbolStatus values. */
enum {
    CU_GET_PROC_ADDRESS_DEFAULT = 0,
    CU_GET_PROC_ADDRESS_LEGACY_STREAM = 1,
    CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM = 2,
};
enum {
    CU_GET_PROC_ADDRESS_SUCCESS = 0,
    CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND = 1,
    CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT = 2,
};
typedef int CUdriverProcAddressQueryResult;

#endif
