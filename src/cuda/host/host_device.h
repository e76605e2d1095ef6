// MX_HD marks the functions of the headers in src/cuda/host that both the
// host (layout code, CPU tests) and the kernels compile.
#pragma once

#if defined(__CUDACC__)
#define MX_HD __host__ __device__ __forceinline__
#else
#define MX_HD inline
#endif
