// Prefill path of the fused MoE on Hopper's warpgroup MMA (wgmma, sm_90a):
// CTA = 2 warpgroups = 128 weight rows (8 strips, one per warp) x 64 pairs of
// one expert (the router's tile map), K in tiles of 64.
//   * A (weights) comes from registers: each warp dequantizes its strip's
//     fragment exactly as for mma.m16n8k16 (the wgmma A-register layout per
//     warp is the same), streamed through a per-warp cp.async ring;
//   * B (64 activation rows) is copied with cp.async into shared memory in the
//     canonical K-major layout without swizzle (8 x 16-byte core matrices:
//     [K chunk of 8][pair][16 B]) and read by wgmma through a descriptor.
// The weight layout permutes K inside each 64-tile (host/mxfp4_bits.h), so the
// activations must be in the same logical order: x is permuted once per call
// (permute_kernel) and gate_up writes h already permuted.
#include <cuda_runtime.h>

#include "core/error.h"
#include "cuda/cuda_check.h"
#include "cuda/per_device_once.h"
#include "cuda/moe_tiles.cuh"
#include "cuda/mxfp4_device.cuh"
#include "cuda/mxfp4_internal.h"

namespace mx::cuda {

namespace {

constexpr int kWgWarps = 8, kWgThreads = kWgWarps * 32;
constexpr int kWgRows = kWgWarps * kStripRows;  // 128
constexpr int kWgPairs = dev::kMoeTilePairs;    // 64
constexpr int kWgStages = 4;
constexpr int kChunkBytes = kWgPairs * 16;  // one 8-wide K chunk of 64 rows: 1024
constexpr int kActStage = 8 * kChunkBytes;  // a 64-wide K tile: 8192
constexpr int kWarpRing = dev::kRingCodeBytes + dev::kRingScaleBytes;  // 640
constexpr int kWgSmem = kWgStages * (kActStage + kWgWarps * kWarpRing);  // 53248

// xp = x with each 64-wide K tile in logical order; pairs of columns stay
// together, so one thread moves 4 bytes.
__global__ void permute_kernel(const uint32_t* __restrict__ x, uint32_t* __restrict__ xp,
                               int64_t words, int K) {
  const int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= words) return;
  const int64_t row = i / (K / 2);
  const int r = int(i % (K / 2)) * 2;
  xp[(row * K + (r & ~63) + mma_logical_col(r & 63)) / 2] = x[i];
}

__device__ __forceinline__ uint64_t smem_desc(uint32_t addr) {
  // K-major, no swizzle: leading (K) byte offset between core matrices 1024,
  // stride (M/N) byte offset between 8-row groups 128.
  return uint64_t((addr & 0x3FFFF) >> 4) | (uint64_t(kChunkBytes >> 4) << 16) |
         (uint64_t(128 >> 4) << 32);
}

__device__ __forceinline__ void wgmma_m64n64k16(float (&d)[32], const uint32_t (&a)[4],
                                                uint64_t desc) {
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, 1, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 "
      "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "
      "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31}, "
      "{%32, %33, %34, %35}, %36, p, 1, 1, 0;\n}\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]),
        "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]),
        "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]),
        "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]),
        "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc)
      : "memory");
}

// acc[32] += W[strip rows, K] * act^T for this warp's strip (row 16 * (warp % 4)
// of its warpgroup's 64) and the tile's 64 rows `rows[2]` (this thread's copy
// rows: pair tid % 64, chunks tid / 64 and + 4).
template <bool kBig>
__device__ __forceinline__ void wgmma_tile_loop(const uint8_t* __restrict__ codes,
                                                const uint8_t* __restrict__ scales, int KT,
                                                const uint16_t* row, uint8_t* smem, float (&acc)[32]) {
  const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31, g = lane >> 2, t = lane & 3;
  const uint32_t act0 = dev::smem_addr(smem);
  const uint32_t ring = act0 + kWgStages * kActStage + warp * kWgStages * kWarpRing;
  const int pair_row = tid & 63, chunk0 = tid >> 6;
  const uint8_t* wsrc = codes + lane * 16;
  const uint8_t* ssrc = scales + (t >> 1) * 16 + (g >> 1) * 4;
  auto issue = [&](int j) {
    const int st = j & (kWgStages - 1);
#pragma unroll
    for (int q = 0; q < 2; ++q) {
      const int chunk = chunk0 + 4 * q;
      const uint32_t dst = act0 + st * kActStage + chunk * kChunkBytes + pair_row * 16;
      const uint16_t* src = row ? row + size_t(j) * kTileK + chunk * 8 : nullptr;
      dev::cp_async_16_or_zero(dst, src ? src : reinterpret_cast<const uint16_t*>(codes), src != nullptr);
    }
    dev::cp_async_16(ring + st * kWarpRing + lane * 16, wsrc + size_t(j) * kTileCodeBytes);
    dev::cp_async_4(ring + st * kWarpRing + dev::kRingCodeBytes + lane * 4,
                    ssrc + size_t(j) * kTileScaleBytes);
  };
#pragma unroll
  for (int j = 0; j < kWgStages - 1; ++j) {
    if (j < KT) issue(j);
    dev::cp_async_commit();
  }
  for (int i = 0; i < KT; ++i) {
    dev::cp_async_wait<kWgStages - 2>();
    // The copies are generic-proxy writes that wgmma reads through the async proxy.
    asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
    __syncthreads();
    if (i + kWgStages - 1 < KT) issue(i + kWgStages - 1);
    dev::cp_async_commit();
    const int st = i & (kWgStages - 1);
    const uint4 w = dev::lds128(ring + st * kWarpRing + lane * 16);
    const uint32_t sw = dev::lds32(ring + st * kWarpRing + dev::kRingCodeBytes + lane * 4);
    const dev::ScaleMul m = dev::scale_multipliers<kBig>((g & 1) ? (sw >> 16) : (sw & 0xFFFFu));
    uint32_t a[4][4];
#pragma unroll
    for (int kk = 0; kk < 4; ++kk) dev::dequant_fragment<kBig>(dev::word_of(w, kk), m, a[kk]);
    asm volatile("wgmma.fence.sync.aligned;" ::: "memory");
#pragma unroll
    for (int kk = 0; kk < 4; ++kk)
      wgmma_m64n64k16(acc, a[kk], smem_desc(act0 + st * kActStage + kk * 2 * kChunkBytes));
    asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory");
    // Before the next barrier lets anyone overwrite this stage.
    asm volatile("wgmma.wait_group.sync.aligned 0;" ::: "memory");
  }
  dev::cp_async_wait<0>();
}

// kGateUp: A = expert's gate_up strips, act = permuted x (row = token), output
// h = SiLU(gate) * up (BF16, row = pair, columns permuted for the down call),
// and zeroes out. Else: A = down strips, act = h, out += weight * y (atomics).
template <bool kBig, bool kGateUp>
__global__ void __launch_bounds__(kWgThreads, 2)
    moe_wgmma_kernel(const uint8_t* __restrict__ codes, const uint8_t* __restrict__ scales,
                     const uint16_t* __restrict__ xp, int H, int I, int topk, MoeScratch s,
                     const float* __restrict__ weights, float* __restrict__ out, int64_t out_elems) {
  extern __shared__ uint4 dyn_smem[];
  if constexpr (kGateUp) {
    const int64_t cta = int64_t(blockIdx.y) * gridDim.x + blockIdx.x;
    const int64_t stride = int64_t(gridDim.x) * gridDim.y * blockDim.x;
    for (int64_t i = cta * blockDim.x + threadIdx.x; i < out_elems; i += stride) out[i] = 0.f;
  }
  __shared__ int s_pair[kWgPairs];
  int e;
  if (!dev::load_tile_pairs(s, s_pair, e)) return;
  const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31, g = lane >> 2, t = lane & 3;
  const int K = kGateUp ? H : I;
  const int KT = K / kTileK;
  const int strips_per_expert = (kGateUp ? 2 * I : H) / kStripRows;
  const int strip = blockIdx.x * kWgWarps + warp;
  const size_t tile0 = (size_t(e) * strips_per_expert + strip) * KT;
  const int my_pair = s_pair[tid & 63];
  const uint16_t* row = my_pair < 0 ? nullptr
                        : kGateUp   ? xp + size_t(my_pair / topk) * H
                                    : s.h + size_t(my_pair) * I;
  float acc[32];
#pragma unroll
  for (int i = 0; i < 32; ++i) acc[i] = 0.f;
  wgmma_tile_loop<kBig>(codes + tile0 * kTileCodeBytes, scales + tile0 * kTileScaleBytes, KT, row,
                        reinterpret_cast<uint8_t*>(dyn_smem), acc);
  // acc[4 nb + c]: strip row g + 8 (c >> 1), tile row (pair) nb * 8 + 2t + (c & 1).
#pragma unroll
  for (int nb = 0; nb < kWgPairs / 8; ++nb)
#pragma unroll
    for (int j = 0; j < 2; ++j) {
      const int pair = s_pair[nb * 8 + 2 * t + j];
      if (pair < 0) continue;
      if constexpr (kGateUp) {
        const float gate = acc[4 * nb + j], up = acc[4 * nb + 2 + j];
        const float silu = gate / (1.f + __expf(-gate));
        const int col = strip * 8 + g;  // real column of h
        s.h[size_t(pair) * I + (col & ~63) + mma_logical_col(col & 63)] =
            dev::float_to_bf16_bits(silu * up);
      } else {
#pragma unroll
        for (int hi = 0; hi < 2; ++hi)
          atomicAdd(out + size_t(pair / topk) * H + strip * kStripRows + g + 8 * hi,
                    weights[pair] * acc[4 * nb + 2 * hi + j]);
      }
    }
}

template <bool kBig>
void launch_wgmma(const MoeWeights& w, const uint16_t* x, uint16_t* xp, int T, int topk,
                  const float* topk_weights, float* out, const MoeScratch& s, cudaStream_t stream) {
  static PerDeviceOnce smem_attributes;
  smem_attributes([] {
    MX_CUDA_CHECK(cudaFuncSetAttribute(moe_wgmma_kernel<kBig, true>,
                                       cudaFuncAttributeMaxDynamicSharedMemorySize, kWgSmem));
    MX_CUDA_CHECK(cudaFuncSetAttribute(moe_wgmma_kernel<kBig, false>,
                                       cudaFuncAttributeMaxDynamicSharedMemorySize, kWgSmem));
  });
  const int H = w.hidden, I = w.intermediate;
  const int64_t words = int64_t(T) * H / 2;
  permute_kernel<<<unsigned((words + 255) / 256), 256, 0, stream>>>(
      reinterpret_cast<const uint32_t*>(x), reinterpret_cast<uint32_t*>(xp), words, H);
  MX_CUDA_CHECK(cudaGetLastError());
  const unsigned tiles = unsigned(moe_max_tiles(T * topk, w.experts));
  moe_wgmma_kernel<kBig, true><<<dim3(unsigned(2 * I / kWgRows), tiles), kWgThreads, kWgSmem, stream>>>(
      w.w13_codes, w.w13_scales, xp, H, I, topk, s, topk_weights, out, int64_t(T) * H);
  MX_CUDA_CHECK(cudaGetLastError());
  moe_wgmma_kernel<kBig, false><<<dim3(unsigned(H / kWgRows), tiles), kWgThreads, kWgSmem, stream>>>(
      w.w2_codes, w.w2_scales, xp, H, I, topk, s, topk_weights, out, 0);
  MX_CUDA_CHECK(cudaGetLastError());
}

}  // namespace

void launch_moe_prefill_wgmma(const MoeWeights& w, const uint16_t* x, uint16_t* xp, int T, int topk,
                              const float* topk_weights, float* out, const MoeScratch& s,
                              cudaStream_t stream) {
  if ((2 * w.intermediate) % kWgRows || w.hidden % kWgRows)
    fail_input("fused_moe_decode: the wgmma path needs 2I and H multiples of {}", kWgRows);
  if (w.big_scales) launch_wgmma<true>(w, x, xp, T, topk, topk_weights, out, s, stream);
  else launch_wgmma<false>(w, x, xp, T, topk, topk_weights, out, s, stream);
}

}  // namespace mx::cuda
