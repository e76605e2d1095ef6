// Fused MoE for decode (few tokens, many experts): route -> gate_up -> down.
//   1. route: one CTA counts tokens per expert, scans, and writes each expert's
//      list of (token, slot) pairs plus the list of experts that got any;
//   2. gate_up: grid (I/8 strips, max active experts); CTAs past the real
//      number of active experts leave at once. Each strip holds 8 gate and the
//      matching 8 up rows, so SiLU(gate) * up happens in the epilogue; h is
//      BF16 [pairs, I] in routed order. Also zeroes `out` for step 3;
//   3. down: grid (H/16 strips, max active experts); the CTA's warps split I,
//      meet in shared memory, and add weight * result into out with FP32
//      atomics.
// Nothing is read back by the host, so the three launches can be captured in
// a CUDA graph.
#include <cuda_runtime.h>

#include <algorithm>
#include <type_traits>

#include "core/error.h"
#include "cuda/cuda_check.h"
#include "cuda/mxfp4_device.cuh"
#include "cuda/mxfp4_kernels.h"

namespace mx::cuda {

namespace {

constexpr int kRouteThreads = 1024;
constexpr int kDownWarps = 4;

struct MoeScratch {
  int* offsets;       // E + 1
  int* sorted_pairs;  // T * topk, pair = token * topk + slot
  int* active;        // E
  int* num_active;    // 1
  uint16_t* h;        // T * topk * I (BF16)
};

size_t align256(size_t n) { return (n + 255) & ~size_t(255); }

MoeScratch carve(void* ws, int E, int pairs, int I) {
  char* p = static_cast<char*>(ws);
  MoeScratch s;
  s.offsets = reinterpret_cast<int*>(p);
  p += align256(sizeof(int) * (E + 1));
  s.sorted_pairs = reinterpret_cast<int*>(p);
  p += align256(sizeof(int) * pairs);
  s.active = reinterpret_cast<int*>(p);
  p += align256(sizeof(int) * E);
  s.num_active = reinterpret_cast<int*>(p);
  p += 256;
  s.h = reinterpret_cast<uint16_t*>(p);
  return s;
}

// Inclusive block-wide sum over kRouteThreads threads.
__device__ int block_inclusive_scan(int v, int* warp_sums) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
#pragma unroll
  for (int d = 1; d < 32; d <<= 1) {
    const int n = __shfl_up_sync(0xffffffffu, v, d);
    if (lane >= d) v += n;
  }
  if (lane == 31) warp_sums[warp] = v;
  __syncthreads();
  if (warp == 0) {
    int w = warp_sums[lane];
#pragma unroll
    for (int d = 1; d < 32; d <<= 1) {
      const int n = __shfl_up_sync(0xffffffffu, w, d);
      if (lane >= d) w += n;
    }
    warp_sums[lane] = w;
  }
  __syncthreads();
  const int r = v + (warp > 0 ? warp_sums[warp - 1] : 0);
  __syncthreads();
  return r;
}

__global__ void __launch_bounds__(kRouteThreads)
    route_kernel(const int* __restrict__ ids, int pairs, int E, int* offsets, int* sorted_pairs,
                 int* active, int* num_active) {
  __shared__ int counts[kRouteThreads];
  __shared__ int cursor[kRouteThreads];
  __shared__ int warp_sums[32];
  const int tid = threadIdx.x;
  counts[tid] = 0;
  __syncthreads();
  for (int p = tid; p < pairs; p += kRouteThreads) {
    const int e = ids[p];
    if (e >= 0 && e < E) atomicAdd(&counts[e], 1);
  }
  __syncthreads();
  const int c = counts[tid];
  const int end = block_inclusive_scan(c, warp_sums);
  const int rank = block_inclusive_scan(c > 0 ? 1 : 0, warp_sums);
  if (tid < E) {
    offsets[tid + 1] = end;
    cursor[tid] = end - c;
    if (c > 0) active[rank - 1] = tid;
  }
  if (tid == 0) offsets[0] = 0;
  if (tid == kRouteThreads - 1) *num_active = rank;
  __syncthreads();
  for (int p = tid; p < pairs; p += kRouteThreads) {
    const int e = ids[p];
    if (e >= 0 && e < E) sorted_pairs[atomicAdd(&cursor[e], 1)] = p;
  }
}

// kGateUpWarps warps split K (H) of one strip.
template <int kGateUpWarps, bool kBig>
__global__ void __launch_bounds__(kGateUpWarps * 32)
    gate_up_kernel(const uint8_t* __restrict__ codes, const uint8_t* __restrict__ scales,
                   const uint16_t* __restrict__ x, int H, int I, int topk,
                   const int* __restrict__ offsets, const int* __restrict__ sorted_pairs,
                   const int* __restrict__ active, const int* __restrict__ num_active,
                   uint16_t* __restrict__ h, float* __restrict__ out, int64_t out_elems) {
  // Zero the combine buffer for the down kernel (stream order makes it safe).
  {
    const int64_t cta = int64_t(blockIdx.y) * gridDim.x + blockIdx.x;
    const int64_t stride = int64_t(gridDim.x) * gridDim.y * blockDim.x;
    for (int64_t i = cta * blockDim.x + threadIdx.x; i < out_elems; i += stride) out[i] = 0.f;
  }
  const int a = blockIdx.y;
  if (a >= *num_active) return;
  __shared__ float partial[kGateUpWarps][4][32];
  const int e = active[a], beg = offsets[e], cnt = offsets[e + 1] - beg;
  const int strip = blockIdx.x, warp = threadIdx.x >> 5, lane = threadIdx.x & 31, g = lane >> 2;
  const int KT = H / kTileK;
  const int kt0 = warp * KT / kGateUpWarps, kt1 = (warp + 1) * KT / kGateUpWarps;
  const size_t tile0 = size_t(e) * (2 * I / kStripRows) * KT + size_t(strip) * KT;
  for (int c0 = 0; c0 < cnt; c0 += 8) {
    const uint16_t* rows[1] = {c0 + g < cnt ? x + size_t(sorted_pairs[beg + c0 + g] / topk) * H
                                            : nullptr};
    float acc[1][4] = {};
    dev::strip_mma<1, kBig>(codes + tile0 * kTileCodeBytes, scales + tile0 * kTileScaleBytes, kt0,
                            kt1, rows, acc);
#pragma unroll
    for (int c = 0; c < 4; ++c) partial[warp][c][lane] = acc[0][c];
    __syncthreads();
    if (threadIdx.x < 64) {
      const int l = threadIdx.x & 31, j = threadIdx.x >> 5;  // token 2t + j
      float gate = 0.f, up = 0.f;
#pragma unroll
      for (int w = 0; w < kGateUpWarps; ++w) {
        gate += partial[w][j][l];
        up += partial[w][j + 2][l];
      }
      const int col = c0 + 2 * (l & 3) + j;
      if (col < cnt) {
        const float silu = gate / (1.f + __expf(-gate));
        h[size_t(beg + col) * I + strip * 8 + (l >> 2)] = dev::float_to_bf16_bits(silu * up);
      }
    }
    __syncthreads();
  }
}

// CTA = kDownWarps warps = (kDownWarps / kKs) strips x kKs K-slices.
template <int kKs, bool kBig>
__global__ void __launch_bounds__(kDownWarps * 32)
    down_kernel(const uint8_t* __restrict__ codes, const uint8_t* __restrict__ scales,
                const uint16_t* __restrict__ h, int H, int I, int topk,
                const int* __restrict__ offsets, const int* __restrict__ sorted_pairs,
                const int* __restrict__ active, const int* __restrict__ num_active,
                const float* __restrict__ weights, float* __restrict__ out) {
  constexpr int kSpc = kDownWarps / kKs;
  const int a = blockIdx.y;
  if (a >= *num_active) return;
  __shared__ float partial[kKs][kSpc][4][32];
  const int e = active[a], beg = offsets[e], cnt = offsets[e + 1] - beg;
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, g = lane >> 2;
  const int s_local = warp % kSpc, slice = warp / kSpc;
  const int strip = blockIdx.x * kSpc + s_local;
  const int KT = I / kTileK;
  const int kt0 = slice * KT / kKs, kt1 = (slice + 1) * KT / kKs;
  const size_t tile0 = size_t(e) * (H / kStripRows) * KT + size_t(strip) * KT;
  for (int c0 = 0; c0 < cnt; c0 += 8) {
    const uint16_t* rows[1] = {c0 + g < cnt ? h + size_t(beg + c0 + g) * I : nullptr};
    float acc[1][4] = {};
    dev::strip_mma<1, kBig>(codes + tile0 * kTileCodeBytes, scales + tile0 * kTileScaleBytes, kt0,
                            kt1, rows, acc);
#pragma unroll
    for (int c = 0; c < 4; ++c) partial[slice][s_local][c][lane] = acc[0][c];
    __syncthreads();
    for (int e = threadIdx.x; e < kSpc * 4 * 32; e += kDownWarps * 32) {
      // Entries: kSpc strips x 4 fragment registers x 32 lanes.
      const int sl = e / 128, c = (e >> 5) & 3, l = e & 31;
      float sum = 0.f;
#pragma unroll
      for (int k = 0; k < kKs; ++k) sum += partial[k][sl][c][l];
      const int col = c0 + 2 * (l & 3) + (c & 1);
      if (col < cnt) {
        const int pair = sorted_pairs[beg + col];
        const int row = (blockIdx.x * kSpc + sl) * kStripRows + (l >> 2) + 8 * (c >> 1);
        atomicAdd(out + size_t(pair / topk) * H + row, weights[pair] * sum);
      }
    }
    __syncthreads();
  }
}

}  // namespace

size_t fused_moe_workspace_bytes(const MoeWeights& w, int max_tokens, int topk) {
  const size_t pairs = size_t(max_tokens) * topk;
  return align256(sizeof(int) * (w.experts + 1)) + align256(sizeof(int) * pairs) +
         align256(sizeof(int) * w.experts) + 256 + align256(2 * pairs * w.intermediate);
}

void fused_moe_decode(const MoeWeights& w, const uint16_t* x, const int* topk_ids,
                      const float* topk_weights, int T, int topk, float* out, void* workspace,
                      cudaStream_t stream, MoeConfig config) {
  const int E = w.experts, H = w.hidden, I = w.intermediate;
  if (E <= 0 || E > kRouteThreads)
    fail_input("fused_moe_decode: {} experts; the router kernel handles 1..{}", E, kRouteThreads);
  if (H % (kTileK * kDownWarps) || I % kTileK)
    fail_input("fused_moe_decode: H={} and I={} must be multiples of 64", H, I);
  if (T <= 0 || topk <= 0) return;
  const int pairs = T * topk;
  MoeScratch s = carve(workspace, E, pairs, I);
  route_kernel<<<1, kRouteThreads, 0, stream>>>(topk_ids, pairs, E, s.offsets, s.sorted_pairs,
                                                s.active, s.num_active);
  MX_CUDA_CHECK(cudaGetLastError());
  const unsigned max_active = unsigned(std::min(E, pairs));
  const int ks = config.down_k_slices ? config.down_k_slices : (pairs <= 16 ? 4 : 1);
  if (ks != 1 && ks != 4) fail_input("fused_moe_decode: down_k_slices must be 1 or 4, got {}", ks);
  const int gks = config.gate_up_k_slices ? config.gate_up_k_slices : 4;
  if (gks != 4 && gks != 8)
    fail_input("fused_moe_decode: gate_up_k_slices must be 4 or 8, got {}", gks);
  const dim3 gu_grid(unsigned(I / 8), max_active);
  const dim3 down_grid(unsigned(H / kStripRows / (kDownWarps / ks)), max_active);
  const int64_t out_elems = int64_t(T) * H;
  auto launch = [&](auto big) {
    constexpr bool kBig = decltype(big)::value;
    if (gks == 8)
      gate_up_kernel<8, kBig><<<gu_grid, 8 * 32, 0, stream>>>(
          w.w13_codes, w.w13_scales, x, H, I, topk, s.offsets, s.sorted_pairs, s.active,
          s.num_active, s.h, out, out_elems);
    else
      gate_up_kernel<4, kBig><<<gu_grid, 4 * 32, 0, stream>>>(
          w.w13_codes, w.w13_scales, x, H, I, topk, s.offsets, s.sorted_pairs, s.active,
          s.num_active, s.h, out, out_elems);
    MX_CUDA_CHECK(cudaGetLastError());
    if (ks == 4)
      down_kernel<4, kBig><<<down_grid, kDownWarps * 32, 0, stream>>>(
          w.w2_codes, w.w2_scales, s.h, H, I, topk, s.offsets, s.sorted_pairs, s.active,
          s.num_active, topk_weights, out);
    else
      down_kernel<1, kBig><<<down_grid, kDownWarps * 32, 0, stream>>>(
          w.w2_codes, w.w2_scales, s.h, H, I, topk, s.offsets, s.sorted_pairs, s.active,
          s.num_active, topk_weights, out);
    MX_CUDA_CHECK(cudaGetLastError());
  };
  if (w.big_scales) launch(std::true_type{});
  else launch(std::false_type{});
}

}  // namespace mx::cuda
