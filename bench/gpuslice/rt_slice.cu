// rt_slice.cu - CUDA runtime check of libcrater-gpuslice.so (run-on-gpu.sh
// item 2). Built with nvcc -cudart static, so the runtime is inside this
// binary and reaches the driver through dlopen/dlsym + cuGetProcAddress.
// With a 1 GiB slice (overhead 0): 768 MiB ok, 512 MiB more must fail with
// cudaErrorMemoryAllocation; cudaMemGetInfo total must be the slice.
#include <cstdio>
#include <cstdlib>
#include <cuda_runtime.h>

int main()
{
    const size_t MiB = 1 << 20;
    void *a = nullptr, *b = nullptr;
    int bad = 0;
    cudaError_t e = cudaMalloc(&a, 768 * MiB);
    printf("cudaMalloc 768 MiB: %s\n", cudaGetErrorName(e));
    bad |= e != cudaSuccess;
    e = cudaMalloc(&b, 512 * MiB);
    printf("cudaMalloc 512 MiB more: %s (want cudaErrorMemoryAllocation)\n",
           cudaGetErrorName(e));
    bad |= e != cudaErrorMemoryAllocation;
    cudaGetLastError(); // clear the sticky-free error state
    size_t fr = 0, tot = 0;
    cudaMemGetInfo(&fr, &tot);
    printf("cudaMemGetInfo: free %zu MiB total %zu MiB\n", fr / MiB,
           tot / MiB);
    const char *want = getenv("EXPECT_TOTAL_MIB");
    if (want && tot / MiB != strtoull(want, nullptr, 10)) {
        printf("total != %s MiB: MISMATCH\n", want);
        bad = 1;
    }
    cudaFree(a);
    e = cudaMalloc(&b, 512 * MiB);
    printf("cudaMalloc 512 MiB after free: %s\n", cudaGetErrorName(e));
    bad |= e != cudaSuccess;
    printf("runtime check: %s\n", bad ? "FAIL" : "PASS");
    return bad;
}
