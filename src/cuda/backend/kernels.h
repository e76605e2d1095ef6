// Launchers of the CUDA backend's kernels (elementwise.cu, layout.cu,
// routing.cu). Plain C++ header (raw device pointers, BF16 as uint16_t bits)
// so that the CudaOps sources are compiled by the host compiler. Every launcher
// is asynchronous on `stream`; the caller checks cudaGetLastError and names the
// op. Shapes are validated by the caller (cuda_ops*.cc) before launching.
#pragma once
#include <cuda_runtime_api.h>

#include <cstdint>

namespace mx::cuda {

// ---- elementwise.cu ----

// out[t, :] = table[ids[t], :] widened to F32. ids are validated by the caller.
void launch_embedding(const void* table, bool table_bf16, const int32_t* ids, int64_t tokens, int64_t d,
                      float* out, cudaStream_t stream);

// out[r] = weight * x[r] / sqrt(mean(x[r]^2) + eps); when delta is not null,
// x[r] += delta[r] first and the sum is written back into x (add_rms_norm).
void launch_rms_norm(float* x, const float* delta, const void* weight, bool weight_bf16, int64_t rows, int64_t d,
                     float eps, float* out, cudaStream_t stream);

// x += scale * delta over n values.
void launch_axpy(float* x, const float* delta, float scale, int64_t n, cudaStream_t stream);

// Rotates dims [offset, offset + 2 * half) of each head in place; inv_freq has
// `half` entries; interleaved pairs (2i, 2i+1) or neox pairs (i, i + half).
void launch_rope(float* x, const int32_t* positions, const float* inv_freq, int64_t tokens, int64_t row_width,
                 int64_t heads, int64_t head_stride, int64_t offset, int64_t half, bool interleaved,
                 float attention_factor, cudaStream_t stream);

// out = silu(gate) * up over n values.
void launch_silu_and_mul(const float* gate, const float* up, int64_t n, float* out, cudaStream_t stream);

// y[M, N] = x[M, K] W[N, K]^T (+ bias[N]); W F32 or BF16 (widened in the dot
// product), FP32 accumulation, F32 activations: the CPU reference's numerics.
// A warp per output: the "f32_activations" reference path, not the fast path
// (that is cuBLAS on BF16 activations, cuda_linear.cc).
void launch_dense_linear(const float* x, const void* w, bool w_bf16, const float* bias, int64_t M, int64_t N,
                         int64_t K, float* y, cudaStream_t stream);

// BF16 round-to-nearest-even copy of F32 activations (the BF16 GEMMs' input).
void launch_f32_to_bf16(const float* x, int64_t n, uint16_t* out, cudaStream_t stream);

// y[m, n] = widen(y_bf16[m, n]) (+ bias[n]).
void launch_bf16_to_f32_bias(const uint16_t* y_bf16, const float* bias, int64_t M, int64_t N, float* y,
                             cudaStream_t stream);

// y[m, n] += bias[n].
void launch_add_bias(float* y, const float* bias, int64_t M, int64_t N, cudaStream_t stream);

// W4A4: out = BF16(qdq(x)) per 32 consecutive values of F32 x (n % 32 == 0),
// bit-exact to quant/mxfp4.h's mxfp4_qdq_activation_inplace on the same F32
// values (a block holding NaN becomes NaN); qdq values are exact in BF16.
void launch_mxfp4_qdq_f32_to_bf16(const float* x, int64_t n, uint16_t* out, cudaStream_t stream);

// ---- layout.cu ----

// out[r, g, :] = x[r, g * group_width + begin : ... + width] for r < rows,
// g < groups; out is [rows, groups * width].
void launch_slice_cols(const float* x, int64_t rows, int64_t groups, int64_t group_width, int64_t begin,
                       int64_t width, float* out, cudaStream_t stream);

// out[i, :] = x[rows[i], :] (d floats per row).
void launch_gather_rows(const float* x, const int64_t* rows, int64_t n, int64_t d, float* out, cudaStream_t stream);

// dst[rows[i], :] = src[i, :].
void launch_scatter_rows(float* dst, const int64_t* rows, int64_t n, int64_t d, const float* src,
                         cudaStream_t stream);

// out[t, g, :] = [a[t, g*da : (g+1)*da], b[t, (shared_b ? 0 : g*db) : ... + db]].
void launch_concat_cols(const float* a, const float* b, int64_t rows, int64_t groups, int64_t da, int64_t db,
                        bool shared_b, float* out, cudaStream_t stream);

// MoE combine of one expert: out[pairs[i] / top_k, :] += weights[pairs[i]] * y[i, :]
// for i < n (a token appears at most once per expert, so no two rows collide).
void launch_moe_scatter_add(const float* y, const int32_t* pairs, const float* weights, int64_t top_k, int64_t n,
                            int64_t d, float* out, cudaStream_t stream);

// ---- routing.cu ----

struct RoutingLaunch {
  int64_t tokens = 0, experts = 0, top_k = 0;
  int64_t n_group = 1, topk_group = 1;
  bool sigmoid = true;  // noaux_tc (sigmoid + correction bias, groups); false: softmax
  bool normalize = true;
  float routed_scaling_factor = 1.0f;
};

// One block per token: scores (sigmoid or softmax), selection scores (+ bias,
// dropped groups -inf), top-k (ties: lower expert first), combine weights
// (normalized in double, scaled), exactly as src/ops/cpu_moe.cc. bias: F32
// [experts] or null. experts <= kMaxRoutedExperts.
constexpr int64_t kMaxRoutedExperts = 2048;  // 24 KB of shared memory per block
constexpr int64_t kMaxRoutedTopK = 64;
constexpr int64_t kMaxRoutingGroups = 256;
void launch_routing(const float* logits, const float* bias, const RoutingLaunch& p, int32_t* ids, float* weights,
                    cudaStream_t stream);

}  // namespace mx::cuda
