// Dense MXFP4 GEMM (W4A16) for 17..64 tokens on Hopper's warpgroup MMA
// (GemmConfig kernel 7). The strip kernels issue one mma.sync per 8 tokens
// per dequantized fragment, so from 16 tokens on their MMA and activation-load
// instructions outgrow the dequant; the tiled kernel (mxfp4_tiled.cuh) shares
// the dequant over 64 tokens but stalls on a barrier, a cp.async wait and
// dependent mma.sync chains per K tile. Here one wgmma.m64nNk16 covers all N
// (16, 32 or 64) tokens of a k16 step for 4 strips at once and runs
// asynchronously, so per weight byte a warp does about what the M <= 8 strip
// kernel does: one batched 16-byte load, the register dequant, and one MMA
// issue per k16 step.
//   * CTA = 2 warpgroups = 8 warps = 8 strips = 128 weight rows; grid
//     (N / 128, K splits). With K split, the splits of one row block form a
//     thread-block cluster and sum their FP32 partials through distributed
//     shared memory (no workspace, graph-safe), as mxfp4_gemm_tiled.cu does.
//   * A (weights): each warp streams its strip from global memory straight
//     into registers in batches of 4 K tiles, the next batch requested before
//     the current one is dequantized (like strip_mma_batched, one batch more
//     in flight). The dequantized fragment of mma.m16n8k16 is exactly the
//     per-warp A fragment of wgmma (fused_moe_wgmma.cu uses the same fact).
//   * B (activations): the token rows of each 4-tile batch are copied from
//     global (L2) into a 3-stage shared-memory ring with 4-byte cp.async,
//     each column pair going straight to its logical K position (the weight
//     layout permutes K inside a 64-tile, host/mxfp4_bits.h), in wgmma's
//     K-major layout without swizzle: core matrices of 8 tokens x 16 bytes,
//     8-wide K chunks of NT rows padded by 16 bytes so the copies of a warp
//     (8 chunks x 4 column pairs of one row) hit 32 different banks.
//   * Per K tile: dequantize into one of two A register sets, 4 wgmma,
//     commit, wait until the previous tile's group is done (its A registers
//     are rewritten next). One barrier per batch of 4 tiles.
// Measured on H200 (bench/mxfp4/results-dense-2026-11-30.md): faster than
// the previous kernels at 32 and 64 tokens on large weights (36864x7168:
// 87.9 vs 96.9 us at 32, 131 vs 155 at 64; 7168x18432: 50.3 vs 55.6 and 73.7
// vs 85.3), slower at 16 tokens (72.5 vs 59.8) and on expert-sized weights.
// Two alternatives measured slower at every size and not kept: weights
// through a shared-memory ring filled by bulk copies (cp.async.bulk +
// mbarrier, 2-4 batches ahead: 36864x7168 at 16 tokens 91.6 us), and that
// ring with one A register set per tile and one MMA wait per batch (94.7 us;
// ncu: 3.7 warps per scheduler, 0.92 eligible, issue 55% busy, DRAM 32%):
// the kernel is bound by instruction issue and latency with 16 warps per SM
// (120 registers, 87-100 KB of shared memory per CTA), not by bytes in flight.
#include <cooperative_groups.h>
#include <cuda_runtime.h>

#include <algorithm>

#include "core/error.h"
#include "cuda/cuda_check.h"
#include "cuda/kernel_launch.cuh"
#include "cuda/mxfp4_device.cuh"
#include "cuda/mxfp4_gemm_wgmma.h"
#include "cuda/per_device_once.h"
#include "cuda/wgmma_rs_narrow.cuh"

namespace mx::cuda {

namespace {

namespace cg = cooperative_groups;

constexpr int kWarps = 8, kThreads = kWarps * 32;
constexpr int kRows = kWarps * kStripRows;  // 128
constexpr int kBatch = 4;                   // K tiles per batch (and per barrier)
constexpr int kStages = 3;                  // B ring depth in batches
constexpr int kMaxTokens = 64;

// Shared-memory layout for NT (16, 32, 64) token rows.
template <int NT>
struct Layout {
  static constexpr int kChunk = NT * 16 + 16;  // one 8-wide K chunk of NT rows, +16 B (banks)
  static constexpr int kTile = 8 * kChunk;     // one 64-wide K tile
  static constexpr int kStage = kBatch * kTile;
  static constexpr int kPartLd = NT + 4;  // FP32 partial row stride (floats)
  static constexpr int kSmem = std::max(kStages * kStage, kRows * kPartLd * 4);
};

// K-major, no swizzle: leading (K) byte offset between core matrices = one
// chunk, stride (N) byte offset between 8-row groups = 128.
__device__ __forceinline__ uint64_t b_desc(uint32_t addr, uint32_t chunk_bytes) {
  return uint64_t((addr & 0x3FFFF) >> 4) | (uint64_t(chunk_bytes >> 4) << 16) |
         (uint64_t(128 >> 4) << 32);
}

// One batch of a strip's weights: 4 tiles of 16 code bytes and a scale pair per lane.
struct WeightBatch {
  uint4 w[kBatch];
  uint32_t sc[kBatch];
};

// Ordinary loads (not .nc): ptxas keeps them before the batch's barrier
// instead of sinking each to its first use (mxfp4_device.cuh).
__device__ __forceinline__ void load_batch(const uint4* wp, const uint16_t* sp, WeightBatch& b) {
#pragma unroll
  for (int u = 0; u < kBatch; ++u) {
    b.w[u] = dev::load_stream_ordered(wp + u * 32);
    b.sc[u] = dev::load_u16_ordered(sp + u * 16);
  }
}

template <int NT, bool kBig>
__global__ void __launch_bounds__(kThreads, 2)
    dense_wgmma_kernel(const uint8_t* __restrict__ codes, const uint8_t* __restrict__ scales,
                       const uint16_t* __restrict__ x, int M, int N, int K,
                       uint16_t* __restrict__ y) {
  using L = Layout<NT>;
  extern __shared__ uint4 dyn_smem[];
  uint8_t* smem = reinterpret_cast<uint8_t*>(dyn_smem);
  const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31, g = lane >> 2, t = lane & 3;
  const int KT = K / kTileK, batches = KT / kBatch;
  const int splits = gridDim.y, split = blockIdx.y;
  const int b0 = split * batches / splits, nb = (split + 1) * batches / splits - b0;
  const int strip = blockIdx.x * kWarps + warp;
  const size_t tile0 = size_t(strip) * KT + size_t(b0) * kBatch;
  const uint4* wp = reinterpret_cast<const uint4*>(codes + tile0 * kTileCodeBytes) + lane;
  const uint16_t* sp =
      reinterpret_cast<const uint16_t*>(scales + tile0 * kTileScaleBytes) + (t >> 1) * 8 + g;
  const uint32_t smem0 = dev::smem_addr(smem);
  // Column pair `lane` of a tile row (real columns 2 lane, 2 lane + 1) lands in
  // logical columns 16 kk + 2 t' + 8 h (mma_logical_col) with t' = lane / 8,
  // kk = (lane / 2) % 4, h = lane % 2: chunk 2 kk + h, byte 4 t' of the row.
  const uint32_t lane_dst = (2 * ((lane >> 1) & 3) + (lane & 1)) * L::kChunk + 4 * (lane >> 3);
  const uint16_t* xsrc = x + size_t(b0) * kBatch * kTileK + 2 * lane;
  auto issue_act = [&](int b, int st) {  // batch b (relative) into stage st
    const uint32_t dst = smem0 + st * L::kStage + lane_dst;
    const uint16_t* src = xsrc + size_t(b) * kBatch * kTileK;
    for (int row = warp; row < M; row += kWarps) {
#pragma unroll
      for (int u = 0; u < kBatch; ++u)
        dev::cp_async_4(dst + u * L::kTile + row * 16, src + size_t(row) * K + u * kTileK);
    }
  };

  float acc[NT / 2];
#pragma unroll
  for (int i = 0; i < NT / 2; ++i) acc[i] = 0.f;
  issue_act(0, 0);
  dev::cp_async_commit();
  if (nb > 1) issue_act(1, 1);
  dev::cp_async_commit();
  WeightBatch cur, next;
  load_batch(wp, sp, cur);
  int st = 0;
  for (int b = 0; b < nb; ++b) {
    if (b + 1 < nb) load_batch(wp + (b + 1) * kBatch * 32, sp + (b + 1) * kBatch * 16, next);
    // Batch b's activations are in (this thread's copies, then everyone's);
    // every warpgroup retired batch b - 1, whose stage is refilled now.
    dev::cp_async_wait<1>();
    dev::fence_proxy_async();
    __syncthreads();
    if (b + 2 < nb) issue_act(b + 2, st == 0 ? 2 : st - 1);
    dev::cp_async_commit();
    const uint32_t stage = smem0 + st * L::kStage;
    uint32_t a[2][4][4];
#pragma unroll
    for (int u = 0; u < kBatch; ++u) {
      const dev::ScaleMul m = dev::scale_multipliers<kBig>(cur.sc[u]);
#pragma unroll
      for (int kk = 0; kk < 4; ++kk) dev::dequant_fragment<kBig>(dev::word_of(cur.w[u], kk), m, a[u & 1][kk]);
      dev::wgmma_fence();
#pragma unroll
      for (int kk = 0; kk < 4; ++kk)
        dev::wgmma_rs_bf16_tokens<NT>(acc, a[u & 1][kk],
                                      b_desc(stage + u * L::kTile + 2 * kk * L::kChunk, L::kChunk));
      dev::wgmma_commit();
      // Tile u - 1's group is done: its A registers are rewritten next.
      dev::wgmma_wait<1>();
    }
    dev::wgmma_wait<0>();
    cur = next;
    st = st == kStages - 1 ? 0 : st + 1;
  }
  dev::fence_accumulators(acc);
  dev::cp_async_wait<0>();
  __syncthreads();  // the ring is free: it holds the partial tile now
  float* part = reinterpret_cast<float*>(smem);  // [128 rows][kPartLd]
#pragma unroll
  for (int i = 0; i < NT / 8; ++i)
#pragma unroll
    for (int c = 0; c < 4; ++c)
      part[(warp * kStripRows + g + 8 * (c >> 1)) * L::kPartLd + 8 * i + 2 * t + (c & 1)] = acc[4 * i + c];
  const size_t row0 = size_t(blockIdx.x) * kRows;
  if (splits == 1) {
    __syncthreads();
    for (int e = tid; e < kRows * M; e += kThreads) {
      const int r = e % kRows, tk = e / kRows;
      y[size_t(tk) * N + row0 + r] = dev::float_to_bf16_bits(part[r * L::kPartLd + tk]);
    }
    return;
  }
  // Rank q of the cluster sums rows [q * 128 / splits, ...) over all ranks.
  cg::cluster_group cluster = cg::this_cluster();
  cluster.sync();
  const int rank = int(cluster.block_rank()), rows_per = kRows / splits;
  for (int e = tid; e < rows_per * M; e += kThreads) {
    const int r = rank * rows_per + e % rows_per, tk = e / rows_per;
    float sum = 0.f;
    for (int q = 0; q < splits; ++q) sum += cluster.map_shared_rank(part, q)[r * L::kPartLd + tk];
    y[size_t(tk) * N + row0 + r] = dev::float_to_bf16_bits(sum);
  }
  cluster.sync();  // keep this CTA's partial alive until every rank has read it
}

// Two K splits where each keeps >= 2 batches. Measured on H200 at 16-64
// tokens, splits 1 / 2 / 4 / 8: 36864x7168 (288 row blocks) at 64 tokens
// 133.6 / 131.0 / 200.7 / 248.7 us; 7168x18432 (56 row blocks) 123.8 / 73.7 /
// 77.8 / 87.7; at 32 tokens 91.7 / 87.9 / 121.2 / 153.1 and 85.5 / 50.3 /
// 51.4 / 56.3. More splits cost more than the extra CTAs give: every split
// re-reads the activations and adds a cluster reduction.
int choose_splits(int batches) { return batches >= 4 ? 2 : 1; }

template <int NT, bool kBig>
void launch_pass(const Mxfp4DeviceWeight& w, const uint16_t* x, int M, uint16_t* y,
                 cudaStream_t stream, int splits) {
  auto* kernel = dense_wgmma_kernel<NT, kBig>;
  static PerDeviceOnce smem_attribute;
  smem_attribute([&] {
    MX_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                       Layout<NT>::kSmem));
  });
  launch_with(kernel, dim3(unsigned(w.rows / kRows), unsigned(splits)), kThreads, Layout<NT>::kSmem, stream,
              LaunchAttrs{false, dim3(1, unsigned(splits))}, w.codes, w.scales, x, M, int(w.rows), int(w.cols), y);
}

template <bool kBig>
void launch_tokens(const Mxfp4DeviceWeight& w, const uint16_t* x, int M, uint16_t* y,
                   cudaStream_t stream, int splits) {
  if (M <= 16) launch_pass<16, kBig>(w, x, M, y, stream, splits);
  else if (M <= 32) launch_pass<32, kBig>(w, x, M, y, stream, splits);
  else launch_pass<64, kBig>(w, x, M, y, stream, splits);
}

}  // namespace

bool dense_wgmma_supported(const Mxfp4DeviceWeight& w) {
  return w.rows % kRows == 0 && w.cols % (kBatch * kTileK) == 0;
}

void launch_dense_wgmma(const Mxfp4DeviceWeight& w, const uint16_t* x, int M, uint16_t* y,
                        cudaStream_t stream, int k_splits) {
  if (!dense_wgmma_supported(w))
    fail_input("mxfp4_gemm: the wgmma kernel needs N % {} == 0 and K % {} == 0, got [{}, {}]", kRows,
               kBatch * kTileK, w.rows, w.cols);
  const int batches = int(w.cols / (kBatch * kTileK));
  const int splits = k_splits ? k_splits : choose_splits(batches);
  if (splits != 1 && splits != 2 && splits != 4 && splits != 8)
    fail_input("mxfp4_gemm: k_splits must be 1, 2, 4 or 8, got {}", splits);
  if (batches < splits)
    fail_input("mxfp4_gemm: {} batches of {} K tiles cannot be split {} ways", batches, kBatch, splits);
  for (int m0 = 0; m0 < M; m0 += kMaxTokens) {
    const int m = std::min(kMaxTokens, M - m0);
    const uint16_t* xs = x + size_t(m0) * w.cols;
    uint16_t* ys = y + size_t(m0) * w.rows;
    if (w.big_scales) launch_tokens<true>(w, xs, m, ys, stream, splits);
    else launch_tokens<false>(w, xs, m, ys, stream, splits);
  }
}

}  // namespace mx::cuda
