// Public entry points of the MXFP4 CUDA kernels (sm_90a). Tensors are raw
// device pointers; BF16 values travel as uint16_t bits so that this header
// needs no CUDA headers beyond the runtime API.
//
// Weights are in the kernel layout of host/mxfp4_bits.h, made once at load
// time by pack_mxfp4 (host) or pack_mxfp4_device (GPU).
#pragma once
#include <cuda_runtime_api.h>

#include <cstdint>

namespace mx::cuda {

struct Mxfp4DeviceWeight {
  const uint8_t* codes = nullptr;   // N * K / 2 bytes, kernel layout, 16-byte aligned
  const uint8_t* scales = nullptr;  // N * K / 32 bytes, kernel layout, 16-byte aligned (bulk prefetch)
  int64_t rows = 0, cols = 0;       // N, K
  bool big_scales = false;          // some scale byte > 128 (pack_mxfp4 reports it)
  // W4A4 on FP8 tensor cores (GemmConfig::fp8; docs/w4a4-fp8.md "Dense"): the
  // codes in the FP8 dense layout (host/fp8_dense_layout.h, same size and
  // scales as `codes`) and each row's largest scale byte, from
  // pack_fp8_dense_device; null where not made.
  const uint8_t* fp8_codes = nullptr;
  const uint8_t* row_smax = nullptr;
};

// Kernel choices. 0 = chosen from the shape (see docs/kernels.md); the bench
// and the CLI can force them.
// kernel: 1 = strip kernel, weights through registers (the first version);
// 2 = strip kernel, weights through a per-warp cp.async ring in shared memory;
// 3 = tiled tensor-core kernel (128 rows x 64 tokens per CTA, N % 128 == 0);
// 4 = strip kernel, weights through a per-warp ring filled by bulk copies
// (cp.async.bulk + mbarrier, one lane per warp issues them), up to 16 tokens;
// 5 = strip kernel 1 with every load of a 4-tile batch issued before its first
// use (weights, scales and activations); 6 = kernel 5 with 3-tile batches and
// at most 64 registers (more warps per SM), up to 8 tokens; 7 = wgmma kernel
// (128 rows x up to 64 tokens per CTA, A = weights dequantized in registers,
// B = activations in shared memory; N % 128 == 0, K % 256 == 0; auto for
// 17..64 tokens on large weights); 8 = strip kernel with each strip's 8
// K-slice warps in a cluster of 2 CTAs of 4 (partial sums through distributed
// shared memory), so that the CTAs spread more evenly over the SMs; 1..16
// tokens, K >= 512 (mxfp4_gemm_balanced.cu); 9 = strip kernel with two strips
// per warp sharing each activation load, 9..16 tokens, N % 32 == 0
// (mxfp4_gemm_pair.cu); 10 = stream-K strip kernel: a grid of exactly the
// resident CTAs, every warp an equal contiguous range of the (strip group, K
// tile) units, partial groups summed through a per-stream FP32 workspace by
// the last arriving warp, 1..16 tokens (mxfp4_gemm_small_streamk.cu; measured
// slower than 5, 8 and 9, not auto).
// 11 = wgmma kernel fed by bulk copies through an mbarrier ring (x first
// rewritten into the MMA's layout in a per-stream scratch; stream-K over the
// resident CTAs or K split over a cluster; N % 128 == 0, K % 128 == 0; auto
// for 17..64 tokens on large weights, mxfp4_gemm_ws.cu).
// 12 = kernel 8 (1..8 tokens) or kernel 9 (9..16 tokens, N % 32 == 0) with a
// software-pipelined loop: each lane copies its operands of the K tile
// batch_tiles ahead into a per-warp cp.async ring before a tile is computed
// (mxfp4_gemm_small16_pipe.cuh).
// Strip kernels 1-2: strips_per_cta must be 1; k_slices 4, 8 or 16 up to 16
// tokens, 4 above. Tiled kernel: k_splits 1, 2, 4 or 8 CTAs (one cluster)
// split K. Kernels 5 and 6 take kernel 1's k_slices. Kernel 4: k_slices 4;
// k_splits 1 or 2 CTAs (one cluster) split K. Kernel 7: k_splits 1, 2, 4 or 8
// CTAs (one cluster) split K (auto 2). Kernel 8: batch_tiles 3 or 4 up to 8
// tokens (kernel 6's and 5's loads), 1 (kernel 1's loop) or 3 for 9..16; 0 = 3
// and 1. Kernel 9: k_slices 4 or 8 warps per strip pair (0 = 4 from 2048
// strips, else 8), batch_tiles 1 or 2 K tiles per load batch (0 = 2).
// Kernel 10: strips_per_warp 1 or 2 (0 = 2 where N % 32 == 0), batch_tiles
// (1 strip: 3 or 4, 2 strips: 1 or 2; 0 = 3 and 2), k_splits = resident CTAs
// per SM to use (0 = all that fit).
// Kernel 11: k_splits 1, 2, 4 or 8 = K split over a cluster of that many CTAs,
// 0 = stream-K; batch_tiles = resident CTAs per SM the ring is sized for (1, 2,
// or 3 up to 32 tokens); strips_per_cta 8 (one per warp) or 16 (two per warp:
// stream-K only, up to 32 tokens, N % 256 == 0); all three 0 = chosen from the
// shape (setting any of them forces the others' defaults: stream-K, 2 CTAs per
// SM, one strip per warp). ring_warps 8 or 16: that many consumer warps of one
// strip plus a producer warp filling the ring (stream-K; 8: 2 CTAs per SM, 16:
// 1 CTA per SM sharing each activation stage over 256 rows, N % 256 == 0); the
// other three fields must then be 0, or strips_per_cta 32 with ring_warps 16
// (two strips per consumer warp, 512-row CTAs, N % 512 == 0, up to 32 tokens,
// small scales; measured slower, session 21).
// Kernel 12: batch_tiles = K tiles in flight (2 or 3; 0 = 2); k_slices as
// kernel 9 from 9 tokens.
// Up to 16 tokens, strip kernels 1, 2, 5, 6, 9 and 12 are launched with
// programmatic dependent launch, kernel 8 and every strip launch above 16
// tokens without (pdl 0 = that rule, 1 = with, -1 = without). H200, graph of
// launches timed in interleaved rounds (2026-12-02, final run of session 11,
// bench/gpu/2026-12-02-session11/final/): PDL with the prefetch against
// neither took 3-20% off the expert and MLA shapes (expert down at 1 token 3.9
// vs 4.9 us, MLA o_proj 3-5%) and 0-2.3% off kernels 5 and 9 on the large
// weights; kernel 8 runs 7-9% slower under it (its one wave of CTAs lands
// unevenly on the SMs); above 16 tokens kernel 1 on 4096x7168 at 64 tokens
// ran 29.1 vs 22.4 us (2026-12-01). Each warp then lets the next kernel
// launch, asks the L2 for its first prefetch_tiles weight tiles per strip (0 =
// 2 under PDL and none without it; -1 = none; a positive count prefetches with
// or without PDL; for kernel 1 on the expert and MLA shapes 2 beat 4 by 2-7%,
// on the large weights they tied, kernel 9 on MLA q_b_proj at 16 tokens ran 4%
// faster with 4), then waits for the previous kernel before it reads anything
// or writes y (a prefetch only warms the L2, which every write goes through: a
// weight written by the previous kernel is still read correctly).
struct GemmConfig {
  int strips_per_cta = 0;  // 16-row strips per CTA (they share activations)
  int k_slices = 0;        // warps per strip, each a slice of K, summed in shared memory
  int kernel = 0;          // 0 = from the shape, else 1..12 (above)
  int k_splits = 0;        // tiled and bulk kernels: CTAs splitting K (0 = from the shape)
  int batch_tiles = 0;     // kernels 8, 9, 10: weight tiles per load batch (0 = from the shape)
  int strips_per_warp = 0;  // kernel 10: strips each warp walks together (0 = from the shape)
  int ring_warps = 0;  // kernel 11: 8 or 16 consumer warps + a producer warp (0 = from the shape)
  int pdl = 0;             // strip kernels: programmatic dependent launch, 0 = the rule, 1 = on, -1 = off
  int prefetch_tiles = 0;  // strip kernels: weight tiles per warp and strip asked of the L2 first
  // 1 = W4A4 on FP8 tensor cores: x is quantized to MXFP4 per 32 along K (the
  // W4A4 contract, bit-exact to the reference quantizer), both operands'
  // block scales folded into E4M3 and multiplied by kernel 11's FP8 variant
  // (needs w.fp8_codes; ring_warps 8 or 16, 0 = the auto rule's). 0 = off;
  // 2 = a timing probe without the quantizer (mxfp4_gemm_fp8 with x null).
  int fp8 = 0;
  // The FP8 variant's timing probe (Fp8RingOptions::probe; bench only).
  int fp8_probe = 0;
};

// Kernel 11's FP8 variant (mxfp4_gemm_fp8): ring_warps 8 or 16 consumer
// warps beside the producer (0 = the rule's); probe: a DenseRingMode timing
// probe that leaves y wrong (1 no MMA, 3 copies only, 10 no segment ends;
// 17..64 tokens a pass; bench only), 0 = the kernel.
struct Fp8RingOptions {
  int ring_warps = 0;
  int probe = 0;
};

// y[M, N] (BF16) = x[M, K] (BF16) * W^T for MXFP4 W: W4A16, FP32 accumulate.
// M is any positive count (decode-shaped: M <= 64 keeps all tokens in one
// pass; larger M loops over groups of 64). Asynchronous on `stream`.
void mxfp4_gemm(const Mxfp4DeviceWeight& w, const uint16_t* x, int M, uint16_t* y,
                cudaStream_t stream, GemmConfig config = {});

// W4A4 on FP8 tensor cores (GemmConfig::fp8 forces it through mxfp4_gemm):
// y = quantize(x) * W^T with both operands' block scales folded into E4M3
// (docs/w4a4-fp8.md "Dense"), for a weight with its FP8 layout
// (w.fp8_codes, w.row_smax). x is BF16: raw activations, or already
// quantize-dequantized ones (the quantizer is idempotent: same codes). Any
// M (passes of 64 tokens). False, nothing launched, when the stream's
// scratch would have to grow inside a capture: the caller then runs the
// BF16 kernels on quantize-dequantized x. x null: a timing probe that
// reuses the stream scratch's last quantized x (one pass; bench only).
bool mxfp4_fp8_dense_supported(const Mxfp4DeviceWeight& w);  // N % 128, K % 128, K <= 32768
bool mxfp4_gemm_fp8(const Mxfp4DeviceWeight& w, const uint16_t* x, int M, uint16_t* y, cudaStream_t stream,
                    Fp8RingOptions options = {});

// W4A4 activations: xq = quantize-dequantize(x) per 32 along K, bit-exact to
// host/mxfp4_reference.h (qdq_block_reference). K % 32 == 0. In place is fine.
void mxfp4_qdq_activations(const uint16_t* x, uint16_t* xq, int M, int K, cudaStream_t stream);

// Device re-layout: checkpoint [N, K/2] codes + [N, K/32] scales (on the GPU)
// into the kernel layout. `row_order` (device, N entries, new row -> old row)
// may be null; fused-MoE gate_up weights pass gate_up_interleaved_rows().
// Scale 255 is not checked here: callers validate (pack_mxfp4 does on host).
void pack_mxfp4_device(const uint8_t* codes, const uint8_t* scales, int64_t N, int64_t K,
                       const int64_t* row_order, uint8_t* packed_codes, uint8_t* packed_scales,
                       cudaStream_t stream);

// The FP8 dense layout of a packed weight (GemmConfig::fp8): fp8_codes (as
// many bytes as w.codes, 16-byte aligned), row_smax (N bytes), and
// *slow_blocks (device int) = the count of blocks with a nonzero code more
// than 11 binades below their row's largest scale, which the kernel's fold
// table does not reach: the weight takes the FP8 path only when it is 0.
void pack_fp8_dense_device(const Mxfp4DeviceWeight& w, uint8_t* fp8_codes, uint8_t* row_smax, int* slow_blocks,
                           cudaStream_t stream);

// Fused MoE (decode and prefill): routing output -> per-expert token lists on
// the GPU -> gate_up grouped GEMM with SiLU(gate) * up fused -> down grouped
// GEMM with the routing weights, accumulated into `out` (FP32 [T, H],
// overwritten). Two or three launches, no host synchronization, capturable in
// a CUDA graph. H % 128 == 0, I % 64 == 0.
struct MoeWeights {
  // Expert e's gate_up weight [2I, H] (rows interleaved by 8, see
  // gate_up_interleaved_rows) starts at w13_codes + e * 2I*H/2 (scales: /32);
  // its down weight [H, I] at w2_codes + e * H*I/2.
  const uint8_t* w13_codes = nullptr;
  const uint8_t* w13_scales = nullptr;
  const uint8_t* w2_codes = nullptr;
  const uint8_t* w2_scales = nullptr;
  int experts = 0, hidden = 0, intermediate = 0;
  bool big_scales = false;
  // W4A4 (the checkpoint's input_tensors spec, e.g. amd/Kimi-K2.5-MXFP4): both
  // GEMMs' inputs are quantize-dequantized per 32 along K first, x before
  // gate_up and h = SiLU(gate) * up (BF16) before down, with the bit-exact
  // quantizer of mxfp4_qdq_activations. False: W4A16.
  bool w4a4 = false;
};

// Bytes of scratch fused_moe_decode needs for up to `max_tokens` tokens.
size_t fused_moe_workspace_bytes(const MoeWeights& w, int max_tokens, int topk);

// Kernel choices, 0 = from the shape (docs/kernels.md). down_k_slices: warps
// per 16-row strip of the down projection (1 or 4; 4 = more, shorter warps for
// few tokens; weight_loads 6: 1, 2 or 4, auto 2); gate_up_k_slices: warps per
// gate_up strip (only 4 is compiled; weight_loads 6: 1, 2 or 4, auto the most
// that keep the grid within one wave of resident warps).
// path: 1 = routed decode (router launch, then gate_up and down per active
// expert); 2 = direct decode (no router launch; T * topk <= 64: each CTA finds
// its expert's pairs itself); 3 = prefill (tensor-core tiles of 128 rows x 64
// pairs, mma.sync); 4 = prefill with gate_up on wgmma (tiles of 128 rows x up
// to 256 pairs, A from registers, B from shared memory) and path 3's down;
// 5 = prefill on wgmma, warp-specialized and persistent (256 rows x up to 128
// pairs per work item, x gathered per pair, bulk tensor copies into an
// mbarrier ring; both GEMMs; W4A4 quantizes h in its chunk layout;
// docs/mxfp4-prefill.md). Auto: 2 up to 16 pairs, 5 from 10 pairs per expert
// on average (T * topk >= 10 * experts; shapes path 5 cannot take: 3 from 32
// pairs per expert), else 1. weight_loads (decode paths):
// 1 = registers, 2 = per-warp cp.async rings, 3 = per-warp rings filled by
// bulk copies (with pdl, down's first weights are requested before it waits
// for gate_up), 4 = registers with every load of a 4-tile batch issued first,
// 5 = as 4 with 3-tile batches and at most 64 registers; 6 = wide CTAs
// (fused_moe_decode.cu: 4 gate_up strips = 32 h columns per CTA, W4A4's h
// quantized in gate_up's epilogue and x by a quantizer launch gate_up overlaps
// through PDL; 3-tile batches, the first one's weights requested before the
// PDL wait); auto: 6 up to 16 pairs, else 1. pdl: 1 = launch down with programmatic
// dependent launch (its CTAs start while gate_up finishes), 2 = off; auto: on
// up to 16 pairs.
struct MoeConfig {
  int down_k_slices = 0;
  int gate_up_k_slices = 0;
  int path = 0;
  int weight_loads = 0;
  int pdl = 0;
  // W4A4 weights (MoeWeights::w4a4) only: 1 = BF16 MMAs on quantize-dequantized
  // activations; 2 = FP8 tensor cores (w4a4_fp8_moe.cu: both operands' block
  // scales folded into E4M3, wgmma E4M3 x E4M3, the tensor cores' sums added
  // into FP32 every 128 along K) in place of the prefill paths 3-5 (the decode
  // paths 1-2 keep BF16 MMAs); 3 = as 2, FP32 every 256 along K; 0 = auto: 1 (FP8
  // measured faster only at 8192 tokens, and less exact: docs/w4a4-fp8.md).
  int w4a4_mma = 0;
  // W4A4: the caller passes x already quantize-dequantized per 32 (CudaOps
  // quantizes it from F32), so the kernels' own pass over x is skipped (the
  // quantizer is idempotent: it would leave the values unchanged).
  bool x_quantized = false;
  // Path 5 (warp-specialized prefill) only, how down adds weight * y into out:
  // 1 = FP32 atomics from the MMA warps after each work item; 2 = the item's
  // results staged in shared memory and added during the next item's K loop
  // (4-stage copy ring instead of 7); 3 = 3/4 of them deferred, the rest
  // added at once (5-stage ring); 4 and 5 = the MMA warps store the item's
  // results as BF16 in shared memory and warps of the producer
  // warpgroup add weight * y into out (16-byte vector reductions) during the
  // next item, 6-stage ring, with two (4) or one (5) wgmma groups in flight
  // (T x H < 2^32); 0 = auto: 5, or 3 from T x H = 2^32 (docs/mxfp4-prefill.md).
  // The SS down (ws_dequant 3) takes 1 or, for any other value, its own deferred adds.
  int ws_down_epilogue = 0;
  // Path 5, gate_up: wgmma groups a warpgroup keeps in flight while it
  // dequantizes the next one's weights: 1 (2 A register buffers) or 2 (3
  // buffers, wait_group 2); 0 = auto (docs/mxfp4-prefill.md).
  int ws_gate_up_depth = 0;
  // Path 5's persistent CTAs per GEMM, 0 = one per SM. Checks set a few so that
  // every CTA runs several work items (the deferred epilogue across items).
  // The wide gate_up on 2-CTA clusters (ws_gate_up_cluster) rounds it down to
  // whole clusters (at least one) that fit on the GPU at once.
  int ws_ctas = 0;
  // Path 5, who dequantizes the weights: 1 = the MMA warps, into their A
  // registers (RS wgmma); 2 = in gate_up a dequant warpgroup writes BF16 A
  // tiles to shared memory for SS wgmma (fused_moe_ws_ss.cu), down as 1; 3 =
  // both GEMMs as 2; 0 = auto (docs/mxfp4-prefill.md).
  int ws_dequant = 0;
  // Path 5, gate_up's work items: 1 = 256 weight rows x up to 128 pairs of one
  // expert; 2 = 128 rows x up to 256 pairs, 224 with ws_box_rows 3
  // (fused_moe_ws_wide.cu: one item per expert and row block at ~171 pairs
  // per expert, weights dequantized once per call; ws_dequant 1 only); 0 =
  // auto (docs/mxfp4-prefill.md).
  int ws_gate_up_items = 0;
  // Path 5, B's box and wgmma width for an item's partial tile of <= 48 pairs
  // (in the wide gate_up: the pairs past the first 128): 1 = 64 pair rows (as
  // before session 14); 2 = 48 (fewer padded MMAs and B copies) in the kernels
  // that compile it (the RS kernels with one wgmma group in flight, the wide
  // gate_up; the others keep 64); 3 = as 2, and the wide gate_up on tiles of
  // up to 224 pairs with the pairs past 128 in a box of 32, 48, 64 or 96
  // rows; 0 = auto: 3 (docs/mxfp4-prefill.md).
  int ws_box_rows = 0;
  // Path 5, B of the wide gate_up (ws_gate_up_items 2; ignored by the other
  // kernels): 1 = each CTA copies the B of its items; 2 = clusters of 2 CTAs
  // on adjacent row blocks of an expert, each copying half of every B stage
  // into both by TMA multicast (B read from L2 half as often); 0 = auto
  // (docs/mxfp4-prefill.md).
  int ws_gate_up_cluster = 0;
  // Path 5, down's work items: 1 = 256 rows x up to 128 pairs; 2 = the wide
  // gate_up's items (128 rows x a tile of up to 224 or 256 pairs: w2 loaded and
  // dequantized once per call), 3 = the same on 2-CTA clusters sharing B;
  // 2 and 3 need the wide gate_up items, ws_dequant 1 and ws_down_epilogue 5
  // (or auto giving them; else the call is refused); 0 = auto: 3 where they
  // fit (docs/mxfp4-prefill.md).
  int ws_down_items = 0;
  // Bench only, path 5: when set, kMoePhaseEvents events recorded on the
  // stream between the call's launches (before the router; after the router,
  // the tile map, the gather, gate_up (W4A4: with h's quantizer; wide gate_up
  // items with down on 256-row items: with the second tile map) and down), so
  // that each phase of one call can be timed with cudaEventElapsedTime.
  cudaEvent_t* phase_events = nullptr;
};
constexpr int kMoePhaseEvents = 6;

// Whether fused_moe_decode with `config` at T tokens rounds each expert's
// down output to BF16 before the FP32 sum over a token's experts (path 5's
// adder epilogue, as a peer's BF16 per-pair rows): its relative error is then
// that of a BF16 output (~1.7e-3), where the other paths keep FP32 (~1e-4).
bool fused_moe_rounds_expert_outputs(const MoeWeights& w, int T, int topk, const MoeConfig& config);

// x: BF16 [T, H]; topk_ids: int32 [T, topk] (ids outside [0, E) are dropped);
// topk_weights: FP32 [T, topk]; workspace: fused_moe_workspace_bytes, 256-byte aligned.
void fused_moe_decode(const MoeWeights& w, const uint16_t* x, const int* topk_ids,
                      const float* topk_weights, int T, int topk, float* out, void* workspace,
                      cudaStream_t stream, MoeConfig config = {});

}  // namespace mx::cuda
