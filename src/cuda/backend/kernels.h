// Launchers of the CUDA backend's elementwise, norm, rope, embedding and
// dense-linear kernels. Plain C++ header (raw device pointers, BF16 as uint16_t
// bits) so that cuda_ops.cc is compiled by the host compiler. Every launcher is
// asynchronous on `stream`; the caller checks cudaGetLastError and names the op.
#pragma once
#include <cuda_runtime_api.h>

#include <cstdint>

namespace mx::cuda {

// out[t, :] = table[ids[t], :] widened to F32. ids are validated by the caller.
void launch_embedding(const void* table, bool table_bf16, const int32_t* ids, int64_t tokens, int64_t d,
                      float* out, cudaStream_t stream);

// out[r] = weight * x[r] / sqrt(mean(x[r]^2) + eps); when delta is not null,
// x[r] += delta[r] first and the sum is written back into x (add_rms_norm).
void launch_rms_norm(float* x, const float* delta, const void* weight, bool weight_bf16, int64_t rows, int64_t d,
                     float eps, float* out, cudaStream_t stream);

// Rotates dims [offset, offset + 2 * half) of each head in place; inv_freq has
// `half` entries; interleaved pairs (2i, 2i+1) or neox pairs (i, i + half).
void launch_rope(float* x, const int32_t* positions, const float* inv_freq, int64_t tokens, int64_t row_width,
                 int64_t heads, int64_t head_stride, int64_t offset, int64_t half, bool interleaved,
                 float attention_factor, cudaStream_t stream);

// out = silu(gate) * up over n values.
void launch_silu_and_mul(const float* gate, const float* up, int64_t n, float* out, cudaStream_t stream);

// y[M, N] = x[M, K] W[N, K]^T (+ bias[N]); W F32 or BF16 (widened in the dot
// product), FP32 accumulation. A warp per output: correct for every shape, not
// the performance path (decode GEMMs belong to cuBLASLt / the MXFP4 kernels).
void launch_dense_linear(const float* x, const void* w, bool w_bf16, const float* bias, int64_t M, int64_t N,
                         int64_t K, float* y, cudaStream_t stream);

// BF16 round-to-nearest-even copy of F32 activations (the MXFP4 GEMM's input).
void launch_f32_to_bf16(const float* x, int64_t n, uint16_t* out, cudaStream_t stream);

// y[m, n] = widen(y_bf16[m, n]) (+ bias[n]).
void launch_bf16_to_f32_bias(const uint16_t* y_bf16, const float* bias, int64_t M, int64_t N, float* y,
                             cudaStream_t stream);

}  // namespace mx::cuda
