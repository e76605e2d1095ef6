// Entry points shared between the .cu files of src/cuda (not public API).
#pragma once
#include <cuda_runtime_api.h>

#include <cstdint>

#include "cuda/host/strip_launch_rule.h"
#include "cuda/mxfp4_kernels.h"

namespace mx::cuda {

// Dense tensor-core kernel (mxfp4_gemm_tiled.cu): needs N % 128 == 0; any M.
// k_splits 0 = chosen from the shape, else 1, 2, 4 or 8.
bool dense_tiled_supported(const Mxfp4DeviceWeight& w);
void launch_dense_tiled(const Mxfp4DeviceWeight& w, const uint16_t* x, int M, uint16_t* y,
                        cudaStream_t stream, int k_splits);

// Scratch of fused_moe_decode, carved from the caller's workspace.
struct MoeScratch {
  int* offsets;       // E + 1: expert e's pairs are sorted_pairs[offsets[e], offsets[e+1])
  int* sorted_pairs;  // T * topk, pair = token * topk + slot
  int* active;        // E: experts with any pair, then *num_active
  int* num_active;    // 1
  int* tile_expert;   // max tiles: expert of each 64-pair tile (prefill path)
  int* tile_start;    // max tiles: its first index into sorted_pairs
  int* num_tiles;     // 1
  int* block_counts;  // moe_route_blocks(pairs) x E: the multi-CTA router's per-CTA counts, then bases
  uint16_t* h;        // T * topk * I (BF16), row = pair
  uint16_t* xq;       // T * H (BF16): W4A4's quantize-dequantized x
  uint16_t* xp;       // T * topk * H BF16: x gathered per pair in chunk layout (path 5), x with K
                      // permuted (path 4, T * H), or the FP8 path's E4M3 x rows (2H-byte stride)
};

// W4A4 (MoeWeights::w4a4): quantize-dequantizes h in place, per 32 along I in
// natural column order, after gate_up wrote it and before down reads it.
// Paths 1-4 call it between their two GEMM launches (path 5 keeps h in its
// chunk layout and quantizes it there, fused_moe_ws.cu); a no-op for W4A16.
void quantize_h_for_w4a4(const MoeWeights& w, const MoeScratch& s, int pairs, cudaStream_t stream);

// CTAs of the multi-CTA router for `pairs` (0 = the one-CTA router): from
// kMultiRouteMinPairs pairs, one per kRoutePairsPerCta, at most
// kMaxRouteCtas. Why: the one-CTA router is held by one SM's shared-memory
// atomics (2 per pair): ~100 us at 8192 Kimi tokens (65,536 pairs), where
// the whole MoE call takes ~11 ms.
constexpr int kMultiRouteMinPairs = 8192, kRoutePairsPerCta = 2048, kMaxRouteCtas = 64;
inline int moe_route_blocks(int pairs) {
  if (pairs < kMultiRouteMinPairs) return 0;
  const int b = (pairs + kRoutePairsPerCta - 1) / kRoutePairsPerCta;
  return b < kMaxRouteCtas ? b : kMaxRouteCtas;
}

// Upper bound of the 64-pair tiles the router makes: sum over experts of
// ceil(count / 64) <= pairs / 64 + experts.
inline int moe_max_tiles(int pairs, int experts) { return pairs / 64 + experts + 1; }

// Prefill path of fused_moe_decode (fused_moe_prefill.cu): after the router
// made the tile map, gate_up and down as tensor-core tiles of 128 rows x 64
// pairs (two launches).
void launch_moe_prefill(const MoeWeights& w, const uint16_t* x, int T, int topk,
                        const float* topk_weights, float* out, const MoeScratch& s,
                        cudaStream_t stream);

// Prefill path on wgmma (fused_moe_wgmma.cu): permutes x into s.xp, then
// gate_up and down with A (weights) from registers and B from shared memory.
void launch_moe_prefill_wgmma(const MoeWeights& w, const uint16_t* x, uint16_t* xp, int T, int topk,
                              const float* topk_weights, float* out, const MoeScratch& s,
                              cudaStream_t stream);

// Prefill path on wgmma, warp-specialized and persistent (fused_moe_ws.cu,
// MoeConfig::path 5): gathers x into xp in pair order (T * topk * H BF16),
// then gate_up and down with A (weights) from registers and B from shared
// memory through bulk tensor copies. W4A4: x arrives quantized, h is
// quantized per 32 (natural column order) in its chunk layout between the GEMMs.
// config: MoeConfig::ws_down_epilogue, ws_gate_up_depth, ws_ctas. The shapes
// it takes: check_moe_prefill_ws_shape (inside check_moe_prefill_ws, which
// fused_moe_decode calls before its first launch; launch_moe_prefill_ws does
// not check again).
void check_moe_prefill_ws_shape(const MoeWeights& w);
// The shape and the settings path 5 takes at T tokens (fused_moe_decode calls
// it before its first launch): the adders' epilogue, forced, needs T x H < 2^32.
void check_moe_prefill_ws(const MoeWeights& w, int T, int pairs, const MoeConfig& config);
// Whether path 5 with `config` at T tokens rounds each expert's down output to
// BF16 (the adders' epilogue: MoeConfig::ws_down_epilogue 4-5, auto while
// T x H < 2^32).
bool moe_prefill_ws_rounds_y(const MoeConfig& config, int T, int H);
void launch_moe_prefill_ws(const MoeWeights& w, const uint16_t* x, uint16_t* xp, int T, int topk,
                           const float* topk_weights, float* out, const MoeScratch& s,
                           cudaStream_t stream, const MoeConfig& config);

}  // namespace mx::cuda
