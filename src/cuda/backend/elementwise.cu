// Elementwise, norm, rope, embedding and dense-linear kernels of the CUDA
// backend. F32 activations throughout, matching the CPU reference's math
// (src/ops/cpu_ops.cc, cpu_linear.cc) up to summation order.
#include <cuda_bf16.h>

#include "cuda/backend/kernels.h"
#include "cuda/e2m1_round.cuh"

namespace mx::cuda {
namespace {

__device__ __forceinline__ float widen(const float* p, int64_t i) { return p[i]; }
__device__ __forceinline__ float widen(const uint16_t* p, int64_t i) {
  return __uint_as_float(uint32_t(p[i]) << 16);
}

template <typename T>
__global__ void embedding_kernel(const T* table, const int32_t* ids, int64_t d, float* out) {
  const int64_t t = blockIdx.x;
  const T* row = table + int64_t(ids[t]) * d;
  for (int64_t i = threadIdx.x; i < d; i += blockDim.x) out[t * d + i] = widen(row, i);
}

constexpr int kNormThreads = 256;

template <typename W>
__global__ void rms_norm_kernel(float* x, const float* delta, const W* weight, int64_t d, float eps, float* out) {
  __shared__ float partial[kNormThreads / 32];
  float* row = x + blockIdx.x * d;
  float ss = 0.f;
  for (int64_t i = threadIdx.x; i < d; i += blockDim.x) {
    float v = row[i];
    if (delta) {
      v += delta[blockIdx.x * d + i];
      row[i] = v;
    }
    ss += v * v;
  }
  for (int o = 16; o > 0; o /= 2) ss += __shfl_xor_sync(0xffffffffu, ss, o);
  if (threadIdx.x % 32 == 0) partial[threadIdx.x / 32] = ss;
  __syncthreads();
  float total = 0.f;
  for (int w = 0; w < kNormThreads / 32; ++w) total += partial[w];
  const float inv = rsqrtf(total / float(d) + eps);
  for (int64_t i = threadIdx.x; i < d; i += blockDim.x) out[blockIdx.x * d + i] = widen(weight, i) * (row[i] * inv);
}

__global__ void rope_kernel(float* x, const int32_t* positions, const float* inv_freq, int64_t row_width,
                            int64_t heads, int64_t head_stride, int64_t offset, int64_t half, bool interleaved,
                            float attention_factor) {
  const int64_t t = blockIdx.x;
  for (int64_t j = threadIdx.x; j < heads * half; j += blockDim.x) {
    const int64_t h = j / half, i = j % half;
    const float angle = float(positions[t]) * inv_freq[i];
    const float c = cosf(angle) * attention_factor, s = sinf(angle) * attention_factor;
    float* p = x + t * row_width + h * head_stride + offset;
    float& a = interleaved ? p[2 * i] : p[i];
    float& b = interleaved ? p[2 * i + 1] : p[i + half];
    const float x0 = a, x1 = b;
    a = x0 * c - x1 * s;
    b = x1 * c + x0 * s;
  }
}

__global__ void axpy_kernel(float* x, const float* delta, float scale, int64_t n) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x)
    x[i] += scale * delta[i];
}

__global__ void add_bias_kernel(float* y, const float* bias, int64_t M, int64_t N) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < M * N; i += int64_t(gridDim.x) * blockDim.x)
    y[i] += bias[i % N];
}

// quant/mxfp4.cc's scale exponent on F32 bits: round amax up to the next power
// of two when its mantissa is >= 1.75, floor(log2) - 2, clamped.
__device__ __forceinline__ int mxfp4_scale_exponent(float amax) {
  const uint32_t rounded = (__float_as_uint(fabsf(amax)) + 0x00200000u) & 0xFF800000u;
  const int field = int(rounded >> 23);
  if (field == 0xff) return 127;
  if (field == 0) return -127;
  return min(max(field - 127 - 2, -127), 127);
}


// One warp per 32-value block: lane i owns value i.
__global__ void qdq_f32_kernel(const float* x, int64_t blocks, uint16_t* out) {
  const int64_t block = blockIdx.x * int64_t(blockDim.x / 32) + threadIdx.x / 32;
  if (block >= blocks) return;  // whole warps leave together
  const int lane = threadIdx.x % 32;
  const float v = x[block * 32 + lane];
  float amax = fabsf(v);
  bool nan = isnan(v);
  for (int o = 16; o > 0; o /= 2) {
    amax = fmaxf(amax, __shfl_xor_sync(0xffffffffu, amax, o));
    nan |= __shfl_xor_sync(0xffffffffu, int(nan), o) != 0;
  }
  float q;
  if (nan) {
    q = __uint_as_float(0x7fc00000u);
  } else {
    const int e = mxfp4_scale_exponent(amax);
    // x * 2^-e and code * 2^e exactly as ldexp does (IEEE multiply by a power of two).
    const float mag = e2m1_round_magnitude(fabsf(ldexpf(v, -e)));
    q = copysignf(ldexpf(mag, e), v);
  }
  out[block * 32 + lane] = __bfloat16_as_ushort(__float2bfloat16_rn(q));
}

__global__ void silu_and_mul_kernel(const float* gate, const float* up, int64_t n, float* out) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x) {
    const float g = gate[i];
    out[i] = g / (1.0f + expf(-g)) * up[i];
  }
}

constexpr int kLinearWarps = 8;

template <typename W>
__global__ void dense_linear_kernel(const float* x, const W* w, const float* bias, int64_t M, int64_t N, int64_t K,
                                    float* y) {
  const int64_t out = blockIdx.x * int64_t(kLinearWarps) + threadIdx.x / 32;
  if (out >= M * N) return;
  const int64_t m = out / N, n = out % N;
  const float* xr = x + m * K;
  const W* wr = w + n * K;
  float acc = 0.f;
  for (int64_t k = threadIdx.x % 32; k < K; k += 32) acc += xr[k] * widen(wr, k);
  for (int o = 16; o > 0; o /= 2) acc += __shfl_xor_sync(0xffffffffu, acc, o);
  if (threadIdx.x % 32 == 0) y[out] = acc + (bias ? bias[n] : 0.f);
}

__global__ void f32_to_bf16_kernel(const float* x, int64_t n, uint16_t* out) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x)
    out[i] = __bfloat16_as_ushort(__float2bfloat16_rn(x[i]));
}

__global__ void bf16_to_f32_bias_kernel(const uint16_t* y_bf16, const float* bias, int64_t M, int64_t N, float* y) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < M * N; i += int64_t(gridDim.x) * blockDim.x)
    y[i] = widen(y_bf16, i) + (bias ? bias[i % N] : 0.f);
}

int64_t grid_for(int64_t n) { return (n + 255) / 256 < 4096 ? (n + 255) / 256 : 4096; }

}  // namespace

void launch_f32_to_bf16(const float* x, int64_t n, uint16_t* out, cudaStream_t stream) {
  if (n) f32_to_bf16_kernel<<<grid_for(n), 256, 0, stream>>>(x, n, out);
}

void launch_bf16_to_f32_bias(const uint16_t* y_bf16, const float* bias, int64_t M, int64_t N, float* y,
                             cudaStream_t stream) {
  if (M * N > 0) bf16_to_f32_bias_kernel<<<grid_for(M * N), 256, 0, stream>>>(y_bf16, bias, M, N, y);
}

void launch_axpy(float* x, const float* delta, float scale, int64_t n, cudaStream_t stream) {
  if (n) axpy_kernel<<<grid_for(n), 256, 0, stream>>>(x, delta, scale, n);
}

void launch_add_bias(float* y, const float* bias, int64_t M, int64_t N, cudaStream_t stream) {
  if (M * N > 0) add_bias_kernel<<<grid_for(M * N), 256, 0, stream>>>(y, bias, M, N);
}

void launch_mxfp4_qdq_f32_to_bf16(const float* x, int64_t n, uint16_t* out, cudaStream_t stream) {
  const int64_t blocks = n / 32;
  if (blocks) qdq_f32_kernel<<<(blocks + 7) / 8, 256, 0, stream>>>(x, blocks, out);
}

void launch_embedding(const void* table, bool table_bf16, const int32_t* ids, int64_t tokens, int64_t d,
                      float* out, cudaStream_t stream) {
  if (tokens == 0) return;
  if (table_bf16)
    embedding_kernel<<<tokens, 256, 0, stream>>>(static_cast<const uint16_t*>(table), ids, d, out);
  else
    embedding_kernel<<<tokens, 256, 0, stream>>>(static_cast<const float*>(table), ids, d, out);
}

void launch_rms_norm(float* x, const float* delta, const void* weight, bool weight_bf16, int64_t rows, int64_t d,
                     float eps, float* out, cudaStream_t stream) {
  if (rows == 0) return;
  if (weight_bf16)
    rms_norm_kernel<<<rows, kNormThreads, 0, stream>>>(x, delta, static_cast<const uint16_t*>(weight), d, eps, out);
  else
    rms_norm_kernel<<<rows, kNormThreads, 0, stream>>>(x, delta, static_cast<const float*>(weight), d, eps, out);
}

void launch_rope(float* x, const int32_t* positions, const float* inv_freq, int64_t tokens, int64_t row_width,
                 int64_t heads, int64_t head_stride, int64_t offset, int64_t half, bool interleaved,
                 float attention_factor, cudaStream_t stream) {
  if (tokens == 0 || half == 0) return;
  rope_kernel<<<tokens, 256, 0, stream>>>(x, positions, inv_freq, row_width, heads, head_stride, offset, half,
                                          interleaved, attention_factor);
}

void launch_silu_and_mul(const float* gate, const float* up, int64_t n, float* out, cudaStream_t stream) {
  if (n == 0) return;
  const int64_t blocks = (n + 255) / 256 < 4096 ? (n + 255) / 256 : 4096;
  silu_and_mul_kernel<<<blocks, 256, 0, stream>>>(gate, up, n, out);
}

void launch_dense_linear(const float* x, const void* w, bool w_bf16, const float* bias, int64_t M, int64_t N,
                         int64_t K, float* y, cudaStream_t stream) {
  if (M * N == 0) return;
  const int64_t blocks = (M * N + kLinearWarps - 1) / kLinearWarps;
  if (w_bf16)
    dense_linear_kernel<<<blocks, kLinearWarps * 32, 0, stream>>>(x, static_cast<const uint16_t*>(w), bias, M, N,
                                                                  K, y);
  else
    dense_linear_kernel<<<blocks, kLinearWarps * 32, 0, stream>>>(x, static_cast<const float*>(w), bias, M, N, K,
                                                                  y);
}

}  // namespace mx::cuda
