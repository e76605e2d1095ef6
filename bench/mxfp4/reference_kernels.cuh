// Random inputs and straightforward reference kernels for the MXFP4 bench.
// The references read the CHECKPOINT layout ([N, K/2] codes, [N, K/32] scales)
// and dequantize element by element, so they share no code path with the
// packed-layout kernels under test.
#pragma once
#include <cuda_runtime_api.h>

#include <cstdint>

namespace mxbench {

void fill_random_bytes(uint8_t* p, size_t n, uint64_t seed, cudaStream_t s);
// Scale bytes uniform in [lo, hi].
void fill_random_scales(uint8_t* p, size_t n, uint64_t seed, int lo, int hi, cudaStream_t s);
// BF16 values, roughly normal with standard deviation `sigma`.
void fill_random_bf16(uint16_t* p, size_t n, uint64_t seed, float sigma, cudaStream_t s);

// y[m, n] = sum_k x[m, k] * W[n, k] in FP32, W from the checkpoint layout.
void reference_linear(const uint8_t* codes, const uint8_t* scales, int N, int K, const uint16_t* x,
                      int M, float* y, cudaStream_t s);

// h[i] = BF16(SiLU(gu[i]) * gu[I + i]) for the checkpoint order (gate rows first).
void reference_silu_mul(const float* gu, int I, uint16_t* h, cudaStream_t s);

}  // namespace mxbench
