#include "reference_kernels.cuh"

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <stdexcept>
#include <string>

namespace mxbench {

namespace {

void check(cudaError_t e, const char* what) {
  if (e != cudaSuccess) throw std::runtime_error(std::string(what) + ": " + cudaGetErrorString(e));
}

__device__ __forceinline__ uint64_t mix(uint64_t z) {
  z += 0x9E3779B97F4A7C15ull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

__global__ void bytes_kernel(uint8_t* p, size_t n, uint64_t seed) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n / 8; i += size_t(gridDim.x) * blockDim.x)
    reinterpret_cast<uint64_t*>(p)[i] = mix(seed ^ (i * 0xD1B54A32D192ED03ull));
  if (blockIdx.x == 0 && threadIdx.x < n % 8) p[n / 8 * 8 + threadIdx.x] = uint8_t(mix(seed + threadIdx.x));
}

__global__ void scales_kernel(uint8_t* p, size_t n, uint64_t seed, int lo, int span) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x)
    p[i] = uint8_t(lo + int(mix(seed ^ (i * 0xA24BAED4963EE407ull)) % uint64_t(span)));
}

__global__ void bf16_kernel(uint16_t* p, size_t n, uint64_t seed, float sigma) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x) {
    const uint64_t r = mix(seed ^ (i * 0x9FB21C651E98DF25ull));
    // Sum of four uniforms: mean 2, variance 1/3.
    float s = 0.f;
    for (int j = 0; j < 4; ++j) s += float((r >> (16 * j)) & 0xFFFF) * (1.f / 65536.f);
    p[i] = __bfloat16_as_ushort(__float2bfloat16_rn((s - 2.f) * 1.7320508f * sigma));
  }
}

__device__ __forceinline__ float e2m1(uint32_t c) {
  const float mag[8] = {0.f, .5f, 1.f, 1.5f, 2.f, 3.f, 4.f, 6.f};
  return (c & 8) ? -mag[c & 7] : mag[c & 7];
}

// One CTA per weight row: dequantize the row into shared memory, then one
// block-wide dot product per token.
__global__ void linear_kernel(const uint8_t* codes, const uint8_t* scales, int N, int K,
                              const uint16_t* x, int M, float* y) {
  extern __shared__ float w[];
  __shared__ float red[32];
  const int n = blockIdx.x;
  for (int k = threadIdx.x; k < K; k += blockDim.x) {
    const uint8_t b = codes[size_t(n) * (K / 2) + k / 2];
    const int e = scales[size_t(n) * (K / 32) + k / 32];
    w[k] = e2m1((k & 1) ? (b >> 4) : (b & 0xF)) * ldexpf(1.f, e - 127);
  }
  __syncthreads();
  for (int m = 0; m < M; ++m) {
    float s = 0.f;
    for (int k = threadIdx.x; k < K; k += blockDim.x)
      s += w[k] * __uint_as_float(uint32_t(x[size_t(m) * K + k]) << 16);
    for (int d = 16; d > 0; d >>= 1) s += __shfl_xor_sync(0xffffffffu, s, d);
    if ((threadIdx.x & 31) == 0) red[threadIdx.x >> 5] = s;
    __syncthreads();
    if (threadIdx.x == 0) {
      float t = 0.f;
      for (int i = 0; i < int(blockDim.x >> 5); ++i) t += red[i];
      y[size_t(m) * N + n] = t;
    }
    __syncthreads();
  }
}

__global__ void silu_mul_kernel(const float* gu, int I, uint16_t* h) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= I) return;
  const float g = gu[i], u = gu[I + i];
  h[i] = __bfloat16_as_ushort(__float2bfloat16_rn(g / (1.f + expf(-g)) * u));
}

}  // namespace

void fill_random_bytes(uint8_t* p, size_t n, uint64_t seed, cudaStream_t s) {
  bytes_kernel<<<2048, 256, 0, s>>>(p, n, seed);
  check(cudaGetLastError(), "fill_random_bytes");
}

void fill_random_scales(uint8_t* p, size_t n, uint64_t seed, int lo, int hi, cudaStream_t s) {
  scales_kernel<<<2048, 256, 0, s>>>(p, n, seed, lo, hi - lo + 1);
  check(cudaGetLastError(), "fill_random_scales");
}

void fill_random_bf16(uint16_t* p, size_t n, uint64_t seed, float sigma, cudaStream_t s) {
  bf16_kernel<<<1024, 256, 0, s>>>(p, n, seed, sigma);
  check(cudaGetLastError(), "fill_random_bf16");
}

void reference_linear(const uint8_t* codes, const uint8_t* scales, int N, int K, const uint16_t* x,
                      int M, float* y, cudaStream_t s) {
  const size_t smem = sizeof(float) * K;
  check(cudaFuncSetAttribute(linear_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(smem)),
        "reference_linear smem");
  linear_kernel<<<N, 256, smem, s>>>(codes, scales, N, K, x, M, y);
  check(cudaGetLastError(), "reference_linear");
}

void reference_silu_mul(const float* gu, int I, uint16_t* h, cudaStream_t s) {
  silu_mul_kernel<<<(I + 255) / 256, 256, 0, s>>>(gu, I, h);
  check(cudaGetLastError(), "reference_silu_mul");
}

}  // namespace mxbench
