// Wide-CTA decode kernels of the fused MoE (MoeConfig::weight_loads 6;
// docs/kernels.md, "MoE decode, wide CTAs"). Against fused_moe.cu's decode
// kernels (one strip per gate_up CTA, 4 K-slices):
//  - a CTA holds 4 strips x 1, 2 or 4 K-slices, so gate_up's CTA makes 32
//    consecutive h columns of each pair: one W4A4 block. W4A4's per-32
//    quantize-dequantize of h happens in the epilogue (warp 0: 4 lanes per
//    block, amax over two shuffles, the bit-exact math of mxfp4_qdq.cuh)
//    instead of a separate launch between gate_up and down;
//  - gate_up's K-slices chosen so that the grid is about one wave of resident
//    warps (at <= 64 registers, 32 warps per SM): 1 token's gate_up is 512
//    CTAs of 8 warps instead of 2048 of 4 (1.9 waves); down's CTA stays 4
//    warps (4 / ks strips x ks K-slices, auto 2: 1792 CTAs at 1 token);
//  - weights in 3-tile register batches (every load of a batch issued before
//    its first use, <= 64 registers); a partial last batch loads the strip's
//    last tile again for its missing slots (an L2 hit) and skips their MMAs
//    instead of running its tiles one round trip each;
//  - the first batch's weights are requested before griddepcontrol.wait: down
//    (launched with PDL) loads them while gate_up's last CTAs run, and gate_up
//    while W4A4's x quantizer runs (launched with PDL after it, direct path).
#include <cuda_runtime.h>

#include <algorithm>
#include <type_traits>

#include "core/error.h"
#include "cuda/cuda_check.h"
#include "cuda/device_info.h"
#include "cuda/fused_moe_decode.h"
#include "cuda/moe_decode_common.cuh"
#include "cuda/mxfp4_device.cuh"
#include "cuda/mxfp4_qdq.cuh"

namespace mx::cuda {

namespace {

constexpr int kStripsPerCta = 4;  // 4 strips x 8 gate/up outputs = 32 h columns
constexpr int kMaxSlices = 4;
constexpr int kMaxThreads = kStripsPerCta * kMaxSlices * 32;
constexpr int kBatch = 3;
constexpr int kDownWarps = 4;
// down's K-slices (2026-12-01, H200, 1 token, CUDA graph of the whole step:
// ks 2 62.98 us vs 65.59 for 4 and 64.60 for 1;
// bench/mxfp4/results-moe-decode-2026-12-01.md).
constexpr int kAutoDownSlices = 2;
// Resident warps per SM at <= 64 registers per thread (65536 / 64 / 32).
constexpr int kWarpsPerSm = 32;

// One batch of n <= kBatch tiles of a strip (n == kBatch unless kPartial):
// every weight, scale and activation load before the MMAs (ordinary loads +
// __syncwarp keep ptxas from sinking them, see strip_mma_batched). kPartial:
// the missing slots load tile n - 1 again (an L2 hit) and skip their MMAs.
// kWait: griddepcontrol.wait between the weight and the activation loads.
template <bool kBig, int kU, bool kPartial, bool kWait>
__device__ __forceinline__ void strip_batch(const uint4* wp, const uint16_t* sp, const uint16_t* xr,
                                            int n, float (&acc)[1][4]) {
  uint4 w[kU], xa[kU][1][2];
  uint32_t sc[kU];
#pragma unroll
  for (int u = 0; u < kU; ++u) {
    const int v = kPartial ? min(u, n - 1) : u;
    w[u] = dev::load_stream_ordered(wp + v * 32);
    sc[u] = dev::load_u16_ordered(sp + v * 16);
  }
  if constexpr (kWait) dev::griddep_wait();
#pragma unroll
  for (int u = 0; u < kU; ++u) {
    const int v = kPartial ? min(u, n - 1) : u;
    xa[u][0][0] = dev::load_act_ordered(xr + v * kTileK);
    xa[u][0][1] = dev::load_act_ordered(xr + v * kTileK + 8);
  }
  __syncwarp();
#pragma unroll
  for (int u = 0; u < kU; ++u)
    if (!kPartial || u < n) dev::mma_tile<1, kBig>(w[u], sc[u], xa[u], acc);
}

// Accumulates k-tiles [kt0, kt1) of one strip for the lane's token row (null:
// a padding token, which reads lane 0's row; its columns are never stored).
// The first batch (weights requested before griddepcontrol.wait, activations
// after it) and a last partial batch take the general path; the batches
// between run without any per-tile condition (a per-tile branch in every
// batch cost 11% more instructions and ~5 us per gate_up, ncu 2026-12-01).
template <bool kBig, int kU = kBatch>
__device__ __forceinline__ void strip_mma_balanced(const uint8_t* __restrict__ codes,
                                                   const uint8_t* __restrict__ scales, int kt0,
                                                   int kt1, const uint16_t* row, float (&acc)[1][4]) {
  const int lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
  const uint4* wp = reinterpret_cast<const uint4*>(codes) + lane + kt0 * 32;
  const uint16_t* sp = reinterpret_cast<const uint16_t*>(scales) + (t >> 1) * 8 + g + kt0 * 16;
  const uint16_t* real = reinterpret_cast<const uint16_t*>(
      __shfl_sync(0xffffffffu, reinterpret_cast<uintptr_t>(row), 0));
  const uint16_t* xr = (row ? row : real) + kt0 * kTileK + 16 * t;
  if (kt0 >= kt1) {
    dev::griddep_wait();
    return;
  }
  int n = min(kU, kt1 - kt0);
  strip_batch<kBig, kU, true, true>(wp, sp, xr, n, acc);
  int kt = kt0 + n;
  wp += n * 32, sp += n * 16, xr += n * kTileK;
  for (; kt + kU <= kt1; kt += kU, wp += kU * 32, sp += kU * 16, xr += kU * kTileK)
    strip_batch<kBig, kU, false, false>(wp, sp, xr, kU, acc);
  if (kt < kt1) strip_batch<kBig, kU, true, false>(wp, sp, xr, kt1 - kt, acc);
}

// W4A4's x quantizer for the direct path: lets gate_up (launched with PDL)
// start and request its first weights while it runs.
__global__ void qdq_x_kernel(const uint16_t* __restrict__ x, uint16_t* __restrict__ xq, int64_t quarters) {
  dev::griddep_launch_dependents();
  const int64_t q = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  const bool valid = q < quarters;
  const uint4 o = dev::qdq_quarter(valid ? reinterpret_cast<const uint4*>(x)[q] : make_uint4(0, 0, 0, 0));
  if (valid) reinterpret_cast<uint4*>(xq)[q] = o;
}

// CTA = kStripsPerCta strips (32 h columns) x blockDim / 128 K-slices.
template <bool kBig, bool kDirect, bool kW4a4>
__global__ void __launch_bounds__(kMaxThreads, 2)
    gate_up_wide_kernel(const uint8_t* __restrict__ codes, const uint8_t* __restrict__ scales,
                        const uint16_t* __restrict__ x, const int* __restrict__ ids, int pairs, int E,
                        int H, int I, int topk, MoeScratch s, float* __restrict__ out,
                        int64_t out_elems) {
  // down may start now: it waits for this grid before it reads h or touches out.
  dev::griddep_launch_dependents();
  {  // zero the combine buffer for down (stream order makes it safe)
    const int64_t cta = int64_t(blockIdx.y) * gridDim.x + blockIdx.x;
    const int64_t stride = int64_t(gridDim.x) * gridDim.y * blockDim.x;
    for (int64_t i = cta * blockDim.x + threadIdx.x; i < out_elems; i += stride) out[i] = 0.f;
  }
  __shared__ int s_pairs[kDirectMaxPairs], s_meta[2];
  const ExpertPairs ep = find_expert<kDirect>(ids, pairs, E, s, s_pairs, s_meta);
  if (ep.cnt == 0) return;
  __shared__ float partial[kMaxSlices][kStripsPerCta][4][32];
  __shared__ uint4 hblock[8][4];  // 8 pairs x 32 BF16 h values: one W4A4 block each
  uint16_t* hb = reinterpret_cast<uint16_t*>(hblock);
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, g = lane >> 2;
  const int ks = blockDim.x / (32 * kStripsPerCta);
  const int sl = warp % kStripsPerCta, slice = warp / kStripsPerCta;
  const int KT = H / kTileK;
  const int kt0 = slice * KT / ks, kt1 = (slice + 1) * KT / ks;
  const size_t tile0 = size_t(ep.e) * (2 * I / kStripRows) * KT + size_t(blockIdx.x * kStripsPerCta + sl) * KT;
  for (int c0 = 0; c0 < ep.cnt; c0 += 8) {
    const uint16_t* row = c0 + g < ep.cnt ? x + size_t(ep.pairs[c0 + g] / topk) * H : nullptr;
    float acc[1][4] = {};
    strip_mma_balanced<kBig>(codes + tile0 * kTileCodeBytes, scales + tile0 * kTileScaleBytes, kt0, kt1,
                             row, acc);
#pragma unroll
    for (int c = 0; c < 4; ++c) partial[slice][sl][c][lane] = acc[0][c];
    __syncthreads();
    // Entries: strip st's gate (fragment register j) and up (j + 2) of pair
    // column 2(l & 3) + j, output row l >> 2 of the strip.
    for (int i = threadIdx.x; i < kStripsPerCta * 64; i += blockDim.x) {
      const int st = i >> 6, j = (i >> 5) & 1, l = i & 31;
      float gate = 0.f, up = 0.f;
      for (int k = 0; k < ks; ++k) {
        gate += partial[k][st][j][l];
        up += partial[k][st][j + 2][l];
      }
      const float silu = gate / (1.f + __expf(-gate));
      hb[(2 * (l & 3) + j) * 32 + st * 8 + (l >> 2)] = dev::float_to_bf16_bits(silu * up);
    }
    __syncthreads();
    if (warp == 0) {  // lane: pair column lane / 4, values 8 (lane % 4) .. + 7 of the block
      const int col = lane >> 2, q = lane & 3;
      uint4 v = hblock[col][q];
      if constexpr (kW4a4) v = dev::qdq_quarter(v);
      if (c0 + col < ep.cnt)
        *reinterpret_cast<uint4*>(s.h + size_t(ep.pairs[c0 + col]) * I + blockIdx.x * 32 + q * 8) = v;
    }
    __syncthreads();
  }
}

// CTA = kDownWarps warps = kDownWarps / ks strips x ks K-slices (the shape of
// fused_moe.cu's down kernel); weighted results are added into out with FP32
// atomics.
template <bool kBig, bool kDirect>
__global__ void __launch_bounds__(kDownWarps * 32, 8)
    down_wide_kernel(const uint8_t* __restrict__ codes, const uint8_t* __restrict__ scales,
                     const int* __restrict__ ids, int pairs, int E, int H, int I, int topk, MoeScratch s,
                     const float* __restrict__ weights, float* __restrict__ out, int ks) {
  __shared__ int s_pairs[kDirectMaxPairs], s_meta[2];
  const ExpertPairs ep = find_expert<kDirect>(ids, pairs, E, s, s_pairs, s_meta);
  if (ep.cnt == 0) return;
  __shared__ float partial[kDownWarps][4][32];  // [slice * spc + strip]
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, g = lane >> 2;
  const int spc = kDownWarps / ks;
  const int sl = warp % spc, slice = warp / spc;
  const int KT = I / kTileK;
  const int kt0 = slice * KT / ks, kt1 = (slice + 1) * KT / ks;
  const size_t tile0 = size_t(ep.e) * (H / kStripRows) * KT + size_t(blockIdx.x * spc + sl) * KT;
  for (int c0 = 0; c0 < ep.cnt; c0 += 8) {
    const uint16_t* row = c0 + g < ep.cnt ? s.h + size_t(ep.pairs[c0 + g]) * I : nullptr;
    float acc[1][4] = {};
    // h comes from gate_up: the first batch's weights are requested before the wait.
    strip_mma_balanced<kBig>(codes + tile0 * kTileCodeBytes, scales + tile0 * kTileScaleBytes, kt0, kt1,
                             row, acc);
#pragma unroll
    for (int c = 0; c < 4; ++c) partial[warp][c][lane] = acc[0][c];
    __syncthreads();
    for (int i = threadIdx.x; i < spc * 4 * 32; i += blockDim.x) {
      const int st = i >> 7, c = (i >> 5) & 3, l = i & 31;
      float sum = 0.f;
      for (int k = 0; k < ks; ++k) sum += partial[k * spc + st][c][l];
      const int col = c0 + 2 * (l & 3) + (c & 1);
      if (col < ep.cnt) {
        const int pair = ep.pairs[col];
        const int r = (blockIdx.x * spc + st) * kStripRows + (l >> 2) + 8 * (c >> 1);
        atomicAdd(out + size_t(pair / topk) * H + r, weights[pair] * sum);
      }
    }
    __syncthreads();
  }
}

// The largest K-slice count (4, 2, 1) whose gate_up grid of `ctas` CTAs of 4
// strips fits the resident warps of one wave.
int wave_k_slices(long ctas) {
  const int sms = sm_count();
  for (int ks = kMaxSlices; ks > 1; ks /= 2)
    if (ctas * kStripsPerCta * ks <= long(sms) * kWarpsPerSm) return ks;
  return 1;
}

void check_requested_slices(int requested, const char* which) {
  if (requested != 0 && requested != 1 && requested != 2 && requested != 4)
    fail_input("fused_moe_decode: {}_k_slices must be 1, 2 or 4 with weight_loads 6, got {}", which, requested);
}

template <bool kBig, bool kDirect, bool kW4a4>
void launch_wide(const MoeWeights& w, const uint16_t* x, const int* ids, const float* topk_weights,
                 int T, int topk, float* out, const MoeScratch& s, cudaStream_t stream,
                 const WideDecodeConfig& c, bool gate_up_pdl) {
  const int E = w.experts, H = w.hidden, I = w.intermediate, pairs = T * topk;
  // Direct: one CTA row per pair (rows of repeated experts leave at once).
  const unsigned ys = kDirect ? unsigned(pairs) : unsigned(std::min(E, pairs));
  const unsigned gx = unsigned(I / 32);
  const int gks = c.gate_up_k_slices ? c.gate_up_k_slices : wave_k_slices(long(gx) * ys);
  const int dks = c.down_k_slices ? c.down_k_slices : kAutoDownSlices;
  const unsigned dx = unsigned(H / kStripRows / (kDownWarps / dks));
  launch_with(gate_up_wide_kernel<kBig, kDirect, kW4a4>, dim3(gx, ys), 32 * kStripsPerCta * gks, 0,
              stream, LaunchAttrs{gate_up_pdl}, w.w13_codes, w.w13_scales, x, ids, pairs, E, H, I, topk, s, out,
                int64_t(T) * H);
  launch_with(down_wide_kernel<kBig, kDirect>, dim3(dx, ys), 32 * kDownWarps, 0, stream, LaunchAttrs{c.pdl},
                w.w2_codes, w.w2_scales, ids, pairs, E, H, I, topk, s, topk_weights, out, dks);
}

}  // namespace

void check_wide_decode_slices(int gate_up_k_slices, int down_k_slices) {
  check_requested_slices(gate_up_k_slices, "gate_up");
  check_requested_slices(down_k_slices, "down");
}

void launch_moe_decode_wide(const MoeWeights& w, const uint16_t* x, const int* ids,
                            const float* topk_weights, int T, int topk, float* out,
                            const MoeScratch& s, cudaStream_t stream, const WideDecodeConfig& c) {
  if (w.intermediate % 32 || w.hidden % (kStripsPerCta * kStripRows))
    fail_input("fused_moe_decode: weight_loads 6 needs I % 32 == 0 and H % 64 == 0, got I={} H={}",
               w.intermediate, w.hidden);
  if (!c.direct && c.quantize_x)
    fail_input("fused_moe_decode: weight_loads 6 quantizes x itself on the direct path only");
  check_wide_decode_slices(c.gate_up_k_slices, c.down_k_slices);
  bool gate_up_pdl = false;
  if (c.quantize_x) {
    const int64_t quarters = int64_t(T) * w.hidden / 8;
    qdq_x_kernel<<<unsigned((quarters + 127) / 128), 128, 0, stream>>>(x, s.xq, quarters);
    MX_CUDA_CHECK(cudaGetLastError());
    x = s.xq;
    gate_up_pdl = true;
  }
  auto run = [&](auto big, auto direct, auto w4a4) {
    launch_wide<decltype(big)::value, decltype(direct)::value, decltype(w4a4)::value>(
        w, x, ids, topk_weights, T, topk, out, s, stream, c, gate_up_pdl);
  };
  auto with_w4a4 = [&](auto big, auto direct) {
    if (w.w4a4) run(big, direct, std::true_type{});
    else run(big, direct, std::false_type{});
  };
  if (w.big_scales) {
    if (c.direct) with_w4a4(std::true_type{}, std::true_type{});
    else with_w4a4(std::true_type{}, std::false_type{});
  } else {
    if (c.direct) with_w4a4(std::false_type{}, std::true_type{});
    else with_w4a4(std::false_type{}, std::false_type{});
  }
}

}  // namespace mx::cuda
