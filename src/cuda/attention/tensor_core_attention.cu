// FlashAttention-2-style causal attention on the tensor cores (mma.sync
// m16n8k16 BF16 -> F32), for prefill and chunked prefill against a cached
// prefix, paged or dense. A block of 4 warps owns 64 query rows of one
// sequence and one q head (16 rows a warp, Q held in registers as A
// fragments, pre-multiplied by scale * log2(e) so scores come out in the log2
// domain); it walks 64-key tiles up to the last row's causal limit:
//   K tile -> smem [key][dk] BF16, V tile -> smem [key][dv] BF16,
//   S = Q K^T (F32; K fragments by ldmatrix.x4, two k-steps per load),
//   causal mask on the diagonal tiles only, online softmax in registers (a
//   row lives in one quad of lanes, exp2 by ex2.approx), P rounded to BF16 and
//   fed straight from the S accumulators as the A operand of O += P V (V
//   fragments by ldmatrix.x4.trans).
// Fragments come in groups of four ldmatrix.x4 loads ahead of the group's
// mma.sync instructions, which walk independent accumulators (k outer, n
// inner), so neither the shared-memory latency nor the mma pipeline's is
// exposed within one warp.
// BF16 sources (BF16 caches; dense F32 inputs are converted to BF16 first)
// are copied with cp.async into two smem stages, one __syncthreads per tile:
// the next tile is in flight while the current one is computed, and the cache
// rows of the tile after that are looked up (block table) into smem
// meanwhile. F32 and FP8 caches are converted on the way in (one stage); FP8
// E4M3 values are exact in BF16, so K and V enter unscaled: the key's scale
// multiplies its score column and the value's scale its P column.
// Blocks run the latest query tiles first: they have the most keys (causal),
// so the short ones fill the tail of the grid.
#include <algorithm>
#include <cfloat>
#include <string>

#include "core/error.h"
#include "cuda/attention/attention_kernels.h"
#include "cuda/attention/kv_access.cuh"
#include "cuda/attention/mma_sync.cuh"
#include "cuda/attention/tensor_core_tuning.h"
#include "cuda/per_device_once.h"

namespace mx::cuda {
namespace {

using attn::cp_async_commit, attn::cp_async_wait, attn::ldmatrix_x4, attn::ldmatrix_x4_trans, attn::mma_bf16,
    attn::smem_addr;

constexpr int kThreads = 128;
constexpr int kKeys = 64;            // keys per tile
constexpr int kPad = 8;              // BF16 elements of padding per smem row (bank spread, 16-byte rows)
constexpr float kLog2e = 1.4426950408889634f;
constexpr float kMaskedRowMax = -1e30f;

__device__ __forceinline__ uint32_t pack_bf16(float lo, float hi) {
  __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);
  return *reinterpret_cast<uint32_t*>(&v);
}

// 2^x; ex2.approx maps -inf to +0, which the masked scores rely on.
__device__ __forceinline__ float fast_exp2(float x) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;\n" : "=f"(y) : "f"(x));
  return y;
}

// 16 bytes global -> shared, asynchronously; src_bytes 0 writes zeros.
__device__ __forceinline__ void cp_async16(void* smem, const void* global, int src_bytes) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(smem_addr(smem)), "l"(global), "r"(src_bytes));
}

// Eight consecutive elements of a KV row as BF16 (unscaled for FP8).
template <KvType T>
__device__ __forceinline__ uint4 kv_load8_bf16(const void* data, int64_t index) {
  if constexpr (T == KvType::BF16) {
    return *reinterpret_cast<const uint4*>(static_cast<const uint16_t*>(data) + index);
  } else if constexpr (T == KvType::F32) {
    const float4 x = *reinterpret_cast<const float4*>(static_cast<const float*>(data) + index);
    const float4 y = *reinterpret_cast<const float4*>(static_cast<const float*>(data) + index + 4);
    return make_uint4(pack_bf16(x.x, x.y), pack_bf16(x.z, x.w), pack_bf16(y.x, y.y), pack_bf16(y.z, y.w));
  } else {
    const uint2 b = *reinterpret_cast<const uint2*>(static_cast<const uint8_t*>(data) + index);
    uint32_t w[4];
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const uint32_t word = i < 2 ? b.x : b.y, shift = 16 * (i % 2);
      w[i] = pack_bf16(fp8_to_f32(uint8_t(word >> shift)), fp8_to_f32(uint8_t(word >> (shift + 8))));
    }
    return make_uint4(w[0], w[1], w[2], w[3]);
  }
}

// The default query tiles per block of a shape (see Layout).
template <int DK, int DV, KvType T>
constexpr int default_tiles_per_block() {
  return T != KvType::BF16 ? 1 : (DK <= 128 && DV <= 128 ? 3 : 2);
}

template <int DK, int DV, KvType T, int SUB = default_tiles_per_block<DK, DV, T>()>
struct Layout {
  static constexpr bool kAsync = T == KvType::BF16;
  // SUB: 64-row query tiles per block. The K/V tiles come from L2 once per
  // block, so a block of several query tiles divides those bytes by that
  // many: one-tile blocks were bound at ~3 TB/s of L2 reads (64 FLOP per
  // byte; H200, 2026-11-30). Registers then allow one block per SM: 3 tiles
  // (12 warps, <= 168 registers) up to 128-wide heads, 2 (8 warps) for 192.
  // The register-path (F32/FP8) tiles stay one per block.
  static constexpr int kSub = SUB;
  static constexpr int kBlockThreads = kThreads * kSub;
  // One-tile blocks: 3 per SM up to 128-wide BF16 heads, else 2, two stages;
  // several-tile blocks: one per SM, three cp.async stages (two tiles in
  // flight while one is computed).
  static constexpr int kMinBlocks = kSub > 1 ? 1 : (kAsync && DK <= 128 && DV <= 128 ? 3 : 2);
  static constexpr int kStages = !kAsync ? 1 : (kSub > 1 ? 3 : 2);
  static constexpr int kStride = DK + kPad;  // K smem row (BF16 elements)
  static constexpr int vStride = DV + kPad;  // V smem row
  static constexpr int kStage = kKeys * (kStride + vStride);  // BF16 elements of one stage
  // Stages, then the cache rows of kStages tiles (I64), then the FP8 scales.
  static constexpr size_t rows_offset = sizeof(uint16_t) * size_t(kStages) * kStage;
  static constexpr size_t scales_offset = rows_offset + kStages * sizeof(int64_t) * kKeys;
  static constexpr size_t bytes = scales_offset + 2 * sizeof(float) * kKeys;
  static_assert(DK % 32 == 0 && DV % 16 == 0, "K fragments come two k-steps per ldmatrix.x4");
};

struct TileSource {
  const AttentionArgs* a;
  int seq, kh;
};

// The cache rows of keys [start, start + kKeys) (0 past hi), one per thread
// of the first kKeys.
__device__ __forceinline__ void lookup_rows(const TileSource& src, int start, int hi, int64_t* rows_s) {
  const int key = threadIdx.x;
  if (key < kKeys) rows_s[key] = start + key < hi ? kv_row(src.a->seqs, src.seq, start + key) : 0;
}

// Issues the cp.async copies of one tile's K and V rows (rows_s from
// lookup_rows) into one stage; zeros past n_keys. kBlockThreads threads.
template <int DK, int DV, int kBlockThreads>
__device__ __forceinline__ void load_tile_async(const TileSource& src, const int64_t* rows_s, int n_keys, uint16_t* k_s,
                                                uint16_t* v_s) {
  const AttentionArgs& a = *src.a;
  constexpr int kChunks = DK / 8, vChunks = DV / 8;
  const uint16_t* k_g = static_cast<const uint16_t*>(a.k.data) + int64_t(src.kh) * a.k.head_stride;
  const uint16_t* v_g = static_cast<const uint16_t*>(a.v.data) + int64_t(src.kh) * a.v.head_stride;
  // Not unrolled: unrolled, the compiler keeps every copy's address live
  // across the tile's math (registers the math needs).
#pragma unroll 1
  for (int c = threadIdx.x; c < kKeys * kChunks; c += kBlockThreads) {
    const int key = c / kChunks, part = c % kChunks;
    const bool in = key < n_keys;
    cp_async16(k_s + key * (DK + kPad) + part * 8, k_g + (in ? rows_s[key] : 0) * a.k.row_stride + part * 8,
               in ? 16 : 0);
  }
#pragma unroll 1
  for (int c = threadIdx.x; c < kKeys * vChunks; c += kBlockThreads) {
    const int key = c / vChunks, part = c % vChunks;
    const bool in = key < n_keys;
    cp_async16(v_s + key * (DV + kPad) + part * 8, v_g + (in ? rows_s[key] : 0) * a.v.row_stride + part * 8,
               in ? 16 : 0);
  }
}

// The same tile through registers (F32 and FP8 sources), with the FP8 scales.
template <int DK, int DV, KvType T>
__device__ __forceinline__ void load_tile_sync(const TileSource& src, int start, int n_keys, uint16_t* k_s,
                                               uint16_t* v_s, float* kscale_s, float* vscale_s) {
  const AttentionArgs& a = *src.a;
  if (threadIdx.x < kKeys) {
    const bool in = threadIdx.x < n_keys;
    const int64_t row = in ? kv_row(a.seqs, src.seq, start + threadIdx.x) : 0;
    kscale_s[threadIdx.x] = (T == KvType::FP8 && in) ? a.k.scale[row] : 1.0f;
    vscale_s[threadIdx.x] = (T == KvType::FP8 && in) ? a.v.scale[row] : 1.0f;
  }
  constexpr int kChunks = DK / 8, vChunks = DV / 8;
  for (int c = threadIdx.x; c < kKeys * (kChunks + vChunks); c += kThreads) {
    const bool is_k = c < kKeys * kChunks;
    const int cc = is_k ? c : c - kKeys * kChunks, per_row = is_k ? kChunks : vChunks;
    const int key = cc / per_row, part = cc % per_row;
    const KvView& view = is_k ? a.k : a.v;
    uint4 x = make_uint4(0, 0, 0, 0);
    if (key < n_keys) {
      const int64_t row = kv_row(a.seqs, src.seq, start + key);
      x = kv_load8_bf16<T>(view.data, row * view.row_stride + int64_t(src.kh) * view.head_stride + part * 8);
    }
    uint16_t* s = is_k ? k_s + key * (DK + kPad) + part * 8 : v_s + key * (DV + kPad) + part * 8;
    *reinterpret_cast<uint4*>(s) = x;
  }
}

// The online-softmax state of one warp's 16 rows, as one thread holds it:
// rows g and g + 8, O columns 2tq.. of every 8-wide n-tile.
template <int DV>
struct RowState {
  float o[DV / 8][4];
  float m[2], l[2];
};

// One 64-key tile for one warp: S = Q K^T, mask, online softmax, O += P V.
// k_s/v_s: the tile in smem; key_base: the tile's first key; limit: this
// thread's two rows' causal key limits; masked: whether any key of the tile
// lies past a limit of the block.
template <int DK, int DV, KvType T>
__device__ __forceinline__ void attend_tile(const uint32_t (&qf)[DK / 16][4], const uint16_t* k_s,
                                            const uint16_t* v_s, const float* kscale_s, const float* vscale_s,
                                            int key_base, const int (&limit)[2], bool masked, RowState<DV>& st) {
  using L = Layout<DK, DV, T>;
  const int lane = threadIdx.x % 32, tq = lane % 4;
  // S = Q K^T. ldmatrix.x4 of K [key][dk] rows nt*8 + lane%8: matrix lane/8
  // covers dims kp*32 + (lane/8)*8, i.e. (b0, b1) of k-step 2kp and of 2kp+1.
  float s[kKeys / 8][4];
#pragma unroll
  for (int nt = 0; nt < kKeys / 8; ++nt) s[nt][0] = s[nt][1] = s[nt][2] = s[nt][3] = 0.f;
  const uint32_t k_addr = smem_addr(k_s + (lane % 8) * L::kStride + (lane / 8) * 8);
  constexpr int kGroup = kKeys / 16;  // n-tiles per group of fragment loads
#pragma unroll
  for (int kp = 0; kp < DK / 32; ++kp) {
#pragma unroll
    for (int n0 = 0; n0 < kKeys / 8; n0 += kGroup) {
      uint32_t b[kGroup][4];
#pragma unroll
      for (int j = 0; j < kGroup; ++j)
        ldmatrix_x4(b[j], k_addr + uint32_t(sizeof(uint16_t) * ((n0 + j) * 8 * L::kStride + kp * 32)));
#pragma unroll
      for (int j = 0; j < kGroup; ++j) mma_bf16(s[n0 + j], qf[2 * kp], b[j][0], b[j][1]);
#pragma unroll
      for (int j = 0; j < kGroup; ++j) mma_bf16(s[n0 + j], qf[2 * kp + 1], b[j][2], b[j][3]);
    }
  }
  // Element e of s[nt] is row g + 8 * (e / 2), key nt * 8 + 2 * tq + e % 2.
  if constexpr (T == KvType::FP8) {
#pragma unroll
    for (int nt = 0; nt < kKeys / 8; ++nt)
#pragma unroll
      for (int e = 0; e < 4; ++e) s[nt][e] *= kscale_s[nt * 8 + 2 * tq + (e % 2)];
  }
  if (masked) {
#pragma unroll
    for (int nt = 0; nt < kKeys / 8; ++nt)
#pragma unroll
      for (int e = 0; e < 4; ++e)
        if (key_base + nt * 8 + 2 * tq + (e % 2) >= limit[e / 2]) s[nt][e] = -INFINITY;
  }
  float tile_max[2] = {kMaskedRowMax, kMaskedRowMax};
#pragma unroll
  for (int nt = 0; nt < kKeys / 8; ++nt) {
    tile_max[0] = fmaxf(tile_max[0], fmaxf(s[nt][0], s[nt][1]));
    tile_max[1] = fmaxf(tile_max[1], fmaxf(s[nt][2], s[nt][3]));
  }
  float alpha[2];
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    tile_max[r] = fmaxf(tile_max[r], __shfl_xor_sync(0xffffffffu, tile_max[r], 1));
    tile_max[r] = fmaxf(tile_max[r], __shfl_xor_sync(0xffffffffu, tile_max[r], 2));
    const float m_new = fmaxf(st.m[r], tile_max[r]);
    alpha[r] = fast_exp2(st.m[r] - m_new);
    st.m[r] = m_new;
    st.l[r] *= alpha[r];
  }
#pragma unroll
  for (int n = 0; n < DV / 8; ++n) {
    st.o[n][0] *= alpha[0], st.o[n][1] *= alpha[0];
    st.o[n][2] *= alpha[1], st.o[n][3] *= alpha[1];
  }
  // P (F32 sums, BF16 operands; FP8: the value scale folded into P).
  uint32_t pf[kKeys / 16][4];
#pragma unroll
  for (int nt = 0; nt < kKeys / 8; ++nt) {
    float p[4];
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      p[e] = fast_exp2(s[nt][e] - st.m[e / 2]);
      st.l[e / 2] += p[e];
      if constexpr (T == KvType::FP8) p[e] *= vscale_s[nt * 8 + 2 * tq + (e % 2)];
    }
    pf[nt / 2][(nt % 2) * 2 + 0] = pack_bf16(p[0], p[1]);
    pf[nt / 2][(nt % 2) * 2 + 1] = pack_bf16(p[2], p[3]);
  }
  // O += P V. ldmatrix.trans of four 8x8 blocks of V [key][dv]: keys
  // kk*16 + {0-7, 8-15} x dims np*16 + {0-7, 8-15} give the B fragments
  // (b0, b1) of n-tiles 2np and 2np + 1; lane L addresses row L % 8 of block L / 8.
  const int blk = lane / 8;
  const uint32_t v_addr = smem_addr(v_s + ((blk % 2) * 8 + lane % 8) * L::vStride + (blk / 2) * 8);
  constexpr int vGroup = DV / 16 < 4 ? DV / 16 : 4;  // n-tile pairs per group of fragment loads
#pragma unroll
  for (int kk = 0; kk < kKeys / 16; ++kk) {
#pragma unroll
    for (int p0 = 0; p0 < DV / 16; p0 += vGroup) {
      uint32_t b[vGroup][4];
#pragma unroll
      for (int j = 0; j < vGroup; ++j)
        ldmatrix_x4_trans(b[j], v_addr + uint32_t(sizeof(uint16_t) * (kk * 16 * L::vStride + (p0 + j) * 16)));
#pragma unroll
      for (int j = 0; j < vGroup; ++j) {
        mma_bf16(st.o[2 * (p0 + j)], pf[kk], b[j][0], b[j][1]);
        mma_bf16(st.o[2 * (p0 + j) + 1], pf[kk], b[j][2], b[j][3]);
      }
    }
  }
}

// (sequence, first row) of 64-row query tile i of the step.
__device__ __forceinline__ void query_tile(const SeqLayout& s, int i, int& seq, int& row0) {
  seq = 0, row0 = i * kQueryTile;
  if (s.q_tiles) seq = s.q_tiles[2 * i], row0 = s.q_tiles[2 * i + 1];
}

// A block = kSub consecutive 64-row query tiles of one q head, 4 warps each.
// Tiles of one sequence share every K/V tile the block loads; a block whose
// tiles straddle sequences walks each sequence's keys in turn (a pass), the
// other sequences' warps idle but loading and syncing with the rest.
template <int DK, int DV, KvType T, int SUB>
__global__ void __launch_bounds__(Layout<DK, DV, T, SUB>::kBlockThreads, Layout<DK, DV, T, SUB>::kMinBlocks)
    tensor_core_attention_kernel(AttentionArgs a) {
  using L = Layout<DK, DV, T, SUB>;
  constexpr int S = L::kStages;
  extern __shared__ __align__(16) unsigned char smem_raw[];
  uint16_t* stage_base = reinterpret_cast<uint16_t*>(smem_raw);
  int64_t* rows_s = reinterpret_cast<int64_t*>(smem_raw + L::rows_offset);  // [S][kKeys]
  float* kscale_s = reinterpret_cast<float*>(smem_raw + L::scales_offset);
  float* vscale_s = kscale_s + kKeys;

  const int tid = threadIdx.x, lane = tid % 32, warp = tid / 32, g = lane / 4, tq = lane % 4;
  const int sub = warp / 4;  // this warp's query tile within the block
  const int num_q_tiles = a.seqs.q_tiles ? a.seqs.num_q_tiles : (a.seqs.single_new + kQueryTile - 1) / kQueryTile;
  const int first_tile = int(gridDim.x - 1 - blockIdx.x) * L::kSub;  // latest rows (most keys) first
  const int n_sub = min(L::kSub, num_q_tiles - first_tile);
  const int h = blockIdx.y, kh = h / (a.q_heads / a.k.heads);

  int my_seq = -1, my_row0 = 0;
  SeqInfo info{0, 0, 0};
  if (sub < n_sub) {
    query_tile(a.seqs, first_tile + sub, my_seq, my_row0);
    info = seq_info(a.seqs, my_seq);
  }
  // This thread's two rows (g and g + 8 of the warp's 16) and their key
  // limits (0 for rows past the sequence: fully masked, never written).
  const int warp_row0 = my_row0 + (warp % 4) * 16;
  int row_i[2], limit[2];
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    row_i[r] = warp_row0 + g + 8 * r;
    limit[r] = row_i[r] < info.num_new ? info.num_cached + row_i[r] + 1 : 0;
  }
  // Keys any row of the warp sees, and keys every row of it sees (tiles
  // inside need no mask).
  const int warp_hi = warp_row0 < info.num_new ? info.num_cached + min(warp_row0 + 16, info.num_new) : 0;
  const int warp_open = warp_row0 + 16 <= info.num_new ? info.num_cached + warp_row0 + 1 : 0;

  // Q fragments (A operand of m16n8k16: rows g / g + 8, dims 2tq.. of each
  // 16), scaled by scale * log2(e) before rounding to BF16.
  const float q_scale = a.scale * kLog2e;
  uint32_t qf[DK / 16][4];
#pragma unroll
  for (int kk = 0; kk < DK / 16; ++kk) {
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      float2 lo = make_float2(0.f, 0.f), hi2 = make_float2(0.f, 0.f);
      if (row_i[r] < info.num_new) {
        const float* q = a.q + (int64_t(info.q_begin + row_i[r]) * a.q_heads + h) * DK + kk * 16 + 2 * tq;
        lo = *reinterpret_cast<const float2*>(q);
        hi2 = *reinterpret_cast<const float2*>(q + 8);
      }
      qf[kk][r] = pack_bf16(lo.x * q_scale, lo.y * q_scale);
      qf[kk][2 + r] = pack_bf16(hi2.x * q_scale, hi2.y * q_scale);
    }
  }

  RowState<DV> st;
#pragma unroll
  for (int n = 0; n < DV / 8; ++n) st.o[n][0] = st.o[n][1] = st.o[n][2] = st.o[n][3] = 0.f;
  st.m[0] = st.m[1] = kMaskedRowMax;
  st.l[0] = st.l[1] = 0.f;

  for (int j0 = 0; j0 < n_sub;) {
    // The pass: tiles j0..j1 of the block, all of one sequence.
    int seq = 0, row0 = 0, j1 = j0;
    query_tile(a.seqs, first_tile + j0, seq, row0);
    for (int s2, r2; j1 + 1 < n_sub; ++j1) {
      query_tile(a.seqs, first_tile + j1 + 1, s2, r2);
      if (s2 != seq) break;
    }
    query_tile(a.seqs, first_tile + j1, seq, row0);
    const SeqInfo pass = seq_info(a.seqs, seq);
    const int hi = pass.num_cached + min(row0 + kQueryTile, pass.num_new);  // keys any row of the pass sees
    const int num_tiles = (hi + kKeys - 1) / kKeys;
    const bool mine = sub >= j0 && sub <= j1;
    const TileSource src{&a, seq, kh};
    if constexpr (L::kAsync) {
      for (int i = 0; i < S; ++i) lookup_rows(src, i * kKeys, hi, rows_s + i * kKeys);
      __syncthreads();
      for (int i = 0; i < S - 1; ++i) {
        if (i < num_tiles) {
          uint16_t* k_s = stage_base + i * L::kStage;
          load_tile_async<DK, DV, L::kBlockThreads>(src, rows_s + i * kKeys, min(kKeys, hi - i * kKeys), k_s,
                                                    k_s + kKeys * L::kStride);
        }
        cp_async_commit();
      }
    }
    for (int t = 0; t < num_tiles; ++t) {
      const int start = t * kKeys;
      uint16_t* k_s = stage_base + (t % S) * L::kStage;
      uint16_t* v_s = k_s + kKeys * L::kStride;
      if constexpr (L::kAsync) {
        // Tile t has landed for every thread, and every warp is done with
        // tile t - 1: its stage is free, as is the row list of tile t.
        cp_async_wait<S - 2>();
        __syncthreads();
        const int next = t + S - 1;
        if (next < num_tiles) {
          uint16_t* k_next = stage_base + (next % S) * L::kStage;
          load_tile_async<DK, DV, L::kBlockThreads>(src, rows_s + (next % S) * kKeys, min(kKeys, hi - next * kKeys),
                                                    k_next, k_next + kKeys * L::kStride);
        }
        cp_async_commit();
        if (t + S < num_tiles) lookup_rows(src, (t + S) * kKeys, hi, rows_s + (t % S) * kKeys);
      } else {
        __syncthreads();  // every warp is done with the previous tile
        load_tile_sync<DK, DV, T>(src, start, min(kKeys, hi - start), k_s, v_s, kscale_s, vscale_s);
        __syncthreads();
      }
      if (mine && start < warp_hi)
        attend_tile<DK, DV, T>(qf, k_s, v_s, kscale_s, vscale_s, start, limit, start + kKeys > warp_open, st);
    }
    if constexpr (L::kAsync) cp_async_wait<0>();
    j0 = j1 + 1;
  }

#pragma unroll
  for (int r = 0; r < 2; ++r) {
    st.l[r] += __shfl_xor_sync(0xffffffffu, st.l[r], 1);
    st.l[r] += __shfl_xor_sync(0xffffffffu, st.l[r], 2);
  }
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    if (row_i[r] >= info.num_new) continue;
    const float inv = 1.0f / st.l[r];
    float* out = a.out + (int64_t(info.q_begin + row_i[r]) * a.q_heads + h) * DV + 2 * tq;
#pragma unroll
    for (int n = 0; n < DV / 8; ++n)
      *reinterpret_cast<float2*>(out + n * 8) = make_float2(st.o[n][2 * r] * inv, st.o[n][2 * r + 1] * inv);
  }
}

__global__ void f32_to_bf16_kernel(const float* x, int64_t n, __nv_bfloat16* out) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x)
    out[i] = __float2bfloat16_rn(x[i]);
}

// Query tiles per block set by set_tensor_core_tiles_per_block (0: the
// shape's default).
int g_tiles_per_block = 0;

template <int DK, int DV, KvType T, int SUB>
void launch_tiles(const AttentionArgs& a, int tiles, cudaStream_t stream) {
  using L = Layout<DK, DV, T, SUB>;
  auto kernel = tensor_core_attention_kernel<DK, DV, T, SUB>;
  if constexpr (L::bytes > 48 * 1024) {
    static PerDeviceOnce raise_smem_limit;  // once per GPU and instance, not per launch
    raise_smem_limit(
        [&] { MX_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(L::bytes))); });
  }
  kernel<<<dim3(unsigned((tiles + SUB - 1) / SUB), unsigned(a.q_heads)), L::kBlockThreads, L::bytes, stream>>>(a);
}

template <int DK, int DV, KvType T>
void launch_shape(const AttentionArgs& a, cudaStream_t stream) {
  const int tiles = a.seqs.q_tiles ? a.seqs.num_q_tiles : (a.seqs.single_new + kQueryTile - 1) / kQueryTile;
  if (tiles == 0) return;
  constexpr int kDefault = default_tiles_per_block<DK, DV, T>();
  if constexpr (T == KvType::BF16) {
    // 3 tiles of 192-wide heads would need more registers than an SM has.
    const int sub = g_tiles_per_block == 0 ? kDefault : std::min(g_tiles_per_block, DK <= 128 ? 3 : 2);
    if (sub == 1) return launch_tiles<DK, DV, T, 1>(a, tiles, stream);
    if (sub == 2) return launch_tiles<DK, DV, T, 2>(a, tiles, stream);
    if constexpr (DK <= 128) return launch_tiles<DK, DV, T, 3>(a, tiles, stream);
  }
  launch_tiles<DK, DV, T, kDefault>(a, tiles, stream);
}

template <int DK, int DV>
void launch_dims(const AttentionArgs& a, cudaStream_t stream) {
  switch (a.k.type) {
    case KvType::F32: return launch_shape<DK, DV, KvType::F32>(a, stream);
    case KvType::BF16: return launch_shape<DK, DV, KvType::BF16>(a, stream);
    case KvType::FP8: return launch_shape<DK, DV, KvType::FP8>(a, stream);
  }
}

}  // namespace

bool tensor_core_attention_supports(int k_dim, int v_dim) {
  return (k_dim == v_dim && (k_dim == 32 || k_dim == 64 || k_dim == 128)) || (k_dim == 192 && v_dim == 128);
}

void launch_f32_to_bf16_rows(const float* x, int64_t n, uint16_t* out, cudaStream_t stream) {
  if (n == 0) return;
  const int64_t blocks = std::min<int64_t>((n + 255) / 256, 4096);
  f32_to_bf16_kernel<<<unsigned(blocks), 256, 0, stream>>>(x, n, reinterpret_cast<__nv_bfloat16*>(out));
}

void set_tensor_core_tiles_per_block(int tiles) {
  if (tiles < 0 || tiles > 3)
    throw InvalidArgument("tensor-core attention: query tiles per block must be 0 (automatic) to 3, got " +
                          std::to_string(tiles));
  g_tiles_per_block = tiles;
}

void launch_tensor_core_attention(const AttentionArgs& a, cudaStream_t stream) {
  if (a.k.dim == 32 && a.v.dim == 32) return launch_dims<32, 32>(a, stream);
  if (a.k.dim == 64 && a.v.dim == 64) return launch_dims<64, 64>(a, stream);
  if (a.k.dim == 128 && a.v.dim == 128) return launch_dims<128, 128>(a, stream);
  if (a.k.dim == 192 && a.v.dim == 128) return launch_dims<192, 128>(a, stream);
}

}  // namespace mx::cuda
