// Internals shared by the two MLA decode kernels (mla_decode.cu: the tiled
// kernel, the combine and the launcher; mla_decode_fused.cu: the FP8 fused
// kernel): launch parameters, tile constants and the device helpers (cp.async,
// ldmatrix, mma, FP8 -> BF16 bit moves). Not a public header: mla_decode.h is.
#pragma once
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <atomic>
#include <cstdint>

#include "cuda/attention/mla_decode.h"
#include "cuda/attention/mma_sync.cuh"

namespace mx::cuda::mla {

using attn::cp_async_commit, attn::cp_async_wait, attn::ldmatrix_x4, attn::ldmatrix_x4_trans, attn::mma_bf16,
    attn::smem_addr;


constexpr int kThreads = 256;
constexpr int kWarps = 8;
constexpr int kTile = 64;                          // tokens per pipeline tile
constexpr int kRowBf16 = kMlaHeadDim * 2;          // 1152 bytes, 72 chunks of 16
constexpr int kRowFp8 = kMlaHeadDim;               // 576 bytes, 36 chunks
constexpr int kTileBf16Bytes = kTile * kRowBf16;   // 73,728
constexpr int kTileFp8Bytes = kTile * kRowFp8;     // 36,864
constexpr int kMaxSmem = 232448;                   // sm_90 opt-in limit per block
constexpr float kLog2e = 1.4426950408889634f;


struct Params {
  const float* q;
  const uint8_t* kv;
  const float* k_scale;
  const int32_t* block_tables;
  const int32_t* context_lens;
  float* out;
  float* ws_o;    // [splits, batch, heads, 512] (splits > 1)
  float* ws_lse;  // [splits, batch, heads]
  int batch, heads, max_blocks, block_size, num_splits;
  int block_shift;  // log2(block_size) when it is a power of two, else -1 (fused kernel)
  float q_scale;  // softmax scale * log2(e)
  int profile_skip;
};

// ---- small device helpers (the PTX wrappers shared with the tensor-core
// attention are in mma_sync.cuh) ------------------------------------------

// Byte offset of 16-byte chunk `chunk` of row `row` in a swizzled tile whose
// rows are `row_bytes` long (a multiple of 128).
__device__ __forceinline__ int swz(int row, int chunk, int row_bytes) {
  return row * row_bytes + (((chunk & ~7) | ((chunk ^ row) & 7)) << 4);
}

__device__ __forceinline__ void cp_async16(uint32_t dst, const void* src, bool valid) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(src), "r"(valid ? 16 : 0));
}
__device__ __forceinline__ void cp_async4(uint32_t dst, const void* src, bool valid) {
  asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;\n" ::"r"(dst), "l"(src), "r"(valid ? 4 : 0));
}
__device__ __forceinline__ uint32_t pack_bf16x2(float lo, float hi) {
  __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);
  return *reinterpret_cast<uint32_t*>(&v);
}

// Four E4M3 bytes -> four BF16 (two words, low byte first) by moving bits:
// the 7 exponent/mantissa bits land in the BF16 exponent's low bits and the
// mantissa's top bits, the sign in the sign. The result is the E4M3 value times
// 2^-120 exactly (subnormals included: both formats' subnormals line up under
// that factor); callers fold 2^120 into q, the token scales and the output.
// Integer ALU only: the F32/F16 conversion instructions run at a quarter of the
// ALU rate and made the decode the bottleneck of the FP8 path.
__device__ __forceinline__ void fp8x4_to_bf16x4(uint32_t x, uint32_t& lo, uint32_t& hi) {
  const uint32_t y0 = __byte_perm(x, 0u, 0x1404);  // byte 0 -> bits 15..8, byte 1 -> bits 31..24
  const uint32_t y1 = __byte_perm(x, 0u, 0x3424);  // bytes 2, 3 likewise
  lo = ((y0 >> 4) & 0x07f007f0u) | (y0 & 0x80008000u);
  hi = ((y1 >> 4) & 0x07f007f0u) | (y1 & 0x80008000u);
}
constexpr float kFp8QBoost = 0x1p64f;    // q is multiplied by this for FP8 tiles ...
constexpr float kFp8OutBoost = 0x1p56f;  // ... so scores and outputs carry 2^-56 until scaled back

// Raises a kernel's dynamic shared-memory limit once per device (`done` holds
// one bit per device already raised).
cudaError_t ensure_smem_limit(std::atomic<uint64_t>& done, const void* kernel, int bytes, bool max_carveout);

// ---- FP8 fused kernel (heads <= 16) -----------------------------------------
//
// The tiled kernel decodes each FP8 tile into a BF16 tile in shared memory and
// runs decode -> scores -> softmax -> P.V between barriers with one CTA per SM:
// nothing overlaps, so it runs at ~39% of the copy bandwidth. This kernel
// decodes in registers, straight into the mma operands, and keeps no BF16
// tile: 32-token tiles, 104 KB of shared memory and <= 128 registers, so two
// CTAs share an SM and one's barriers hide behind the other's work.
//   scores:  warp (tg, kq) = (warp % 2, warp / 2) computes 16 heads x 16 tokens
//            [16 tg, +16) over dims [144 kq, +144): the B operand (K) comes from
//            one 32-bit load of four FP8 bytes per k-step; the dot product does
//            not care about the order of k, so the four bytes (dims 4 q4 .. +3 of
//            the k-step) stand for the mma's k = 2q4, 2q4+1, 2q4+8, 2q4+9, and q
//            is loaded in the same order. Partial scores go to shared memory.
//   softmax: warp w owns heads 2w, 2w+1 (16 lanes each, two tokens a lane): sums
//            the four partials, scales, masks, keeps the running max and sum,
//            writes P (times the token scale, BF16) and the rescale factor.
//   values:  warp w accumulates 16 heads x dims [64 w, +64): ldmatrix.trans
//            of the FP8 rows gives each lane two tokens x two adjacent dims in
//            one register, which two byte permutes turn into the B operands of
//            the even-dim and the odd-dim n-tile.
// The FP8 rows are stored with a 16-byte-chunk XOR swizzle (fp8_pos) that keeps
// the 32-bit score loads, the ldmatrix phases and the cp.async stores free of
// bank conflicts.
namespace fused {
constexpr int kTile = 32;
constexpr int kStages = 5;
constexpr int kStageBytes = kTile * kRowFp8;            // 18,432
constexpr int kHeads = 16;
constexpr int kKq = 4;                                  // score warps along the 576 dims
constexpr int kPartStride = kTile + 8;                  // floats per head row (pad: no bank conflicts)
constexpr int kOffScale = kStages * kStageBytes;        // F32 [stages][32]
constexpr int kOffPart = kOffScale + kStages * kTile * 4;  // F32 [kq][16][40]
constexpr int kOffP = kOffPart + kKq * kHeads * kPartStride * 4;  // BF16 [16][32], swizzled
constexpr int kOffAlpha = kOffP + kHeads * kTile * 2;   // F32 [16]
constexpr int kOffL = kOffAlpha + kHeads * 4;           // F32 [16]
constexpr int kBytes = kOffL + kHeads * 4;              // 104,192: two CTAs per SM
static_assert(2 * (kBytes + 1024) <= 233472, "two CTAs must fit an SM's shared memory");
}  // namespace fused

// ---- FP8 stage tiles of 32 tokens, shared by the fused and the FP8-MMA kernels ----

__device__ __forceinline__ uint32_t prmt(uint32_t x, uint32_t sel) {
  uint32_t r;
  asm("prmt.b32 %0, %1, %2, %3;\n" : "=r"(r) : "r"(x), "r"(0u), "r"(sel));
  return r;
}
// Two E4M3 bytes of x -> BF16x2 (the E4M3 value times 2^-120, as
// fp8x4_to_bf16x4): SEL puts byte i in the low byte of a 16-bit half and its
// sign, replicated, in the high byte (prmt's sign mode); a shift by 4 lines up
// exponent and mantissa and carries the sign to bit 15; one mask keeps those.
template <uint32_t SEL>
__device__ __forceinline__ uint32_t fp8x2(uint32_t x) {
  return (prmt(x, SEL) << 4) & 0x87f087f0u;
}
constexpr uint32_t kBytes01 = 0x9180, kBytes23 = 0xB3A2, kBytes02 = 0xA280, kBytes13 = 0xB391;


// Chunk slot of 16-byte chunk `chunk` (0..35) of FP8 row `row`: XOR swizzle
// inside each 8-chunk group of the values, inside the last 4 chunks (rope) by
// row / 2.
__device__ __forceinline__ int fp8_pos(int row, int chunk) {
  return chunk < 32 ? (chunk & ~7) | ((chunk ^ row) & 7) : 32 | ((chunk ^ (row >> 1)) & 3);
}
// Cache slot (block * block_size + offset) of token `token` of a sequence (0
// past the context). A slot fits 32 bits: 2^32 rows of 576 bytes would be
// 2.5 TB of cache.
__device__ __forceinline__ uint32_t token_slot(const Params& p, const int32_t* table, int ctx, int token) {
  if (token >= ctx) return 0;
  int blk, off;
  if (p.block_shift >= 0) {
    blk = token >> p.block_shift, off = token & ((1 << p.block_shift) - 1);
  } else {
    blk = token / p.block_size, off = token - blk * p.block_size;
  }
  return uint32_t(__ldg(table + blk)) * uint32_t(p.block_size) + uint32_t(off);
}
// The slot of this thread's row of tile `tile`, looked up one tile ahead of its copy.
__device__ __forceinline__ uint32_t fused_row_slot(const Params& p, const int32_t* table, int ctx, int tile) {
  return token_slot(p, table, ctx, tile * fused::kTile + (threadIdx.x >> 3));
}

// Tile `tile` (32 tokens) into stage `st`: thread (row = tid / 8, sub = tid % 8)
// copies chunks sub, sub + 8, ... of one row. Chunk sub + 8j (j < 4) sits at
// slot 8j + (sub ^ row) % 8 (fp8_pos), so one per-thread offset plus
// immediates addresses all of them; chunk 32 + sub (sub < 4) at 32 + (sub ^ row/2) % 4.
__device__ __forceinline__ void fused_load_tile(const Params& p, uint32_t slot, int ctx, int tile, uint8_t* smem, int st) {
  const int row = threadIdx.x >> 3, sub = threadIdx.x & 7;
  const bool valid = tile * fused::kTile + row < ctx;
  const uint8_t* src = valid ? p.kv + size_t(slot) * kRowFp8 + sub * 16 : p.kv;
  const uint32_t dst = smem_addr(smem + st * fused::kStageBytes + row * kRowFp8);
  const uint32_t body = dst + (((sub ^ row) & 7) << 4);
#pragma unroll
  for (int j = 0; j < 4; ++j) cp_async16(body + 128 * j, valid ? src + 128 * j : src, valid);
  if (sub < 4) cp_async16(dst + ((32 | ((sub ^ (row >> 1)) & 3)) << 4), valid ? src + 512 : src, valid);
  if (sub == 0) {
    float* scale = reinterpret_cast<float*>(smem + fused::kOffScale) + st * fused::kTile + row;
    cp_async4(smem_addr(scale), valid ? p.k_scale + slot : p.k_scale, valid);
  }
}

// Launches the FP8 fused kernel (mla_decode_fused.cu).
cudaError_t launch_fused(const Params& p, int head_groups, cudaStream_t stream);

// ---- FP8 wgmma kernel (heads <= 8, mla_decode_wgmma.cu) ----------------------
// One warpgroup per CTA, two CTAs per SM, 64-token tiles in two cp.async
// stages; scores and P.V on FP8 wgmma (design in mla_decode_wgmma.cu).
namespace wgmma_kernel {
constexpr int kTile = 64;   // tokens per tile (the split model in mla_decode.cu uses it too)
constexpr int kHeads = 8;   // the most heads it takes
}  // namespace wgmma_kernel
cudaError_t launch_wgmma(const Params& p, cudaStream_t stream);

}  // namespace mx::cuda::mla
