// How the dense ring kernel (GemmConfig kernel 11, src/cuda/mxfp4_gemm_ws.cu)
// runs a pass of up to 64 tokens when nothing is forced: a host-only rule,
// here so that the CPU tests check which plans the automatic choice can reach
// (the kernel instantiates only some combinations).
#pragma once
#include <cstdint>

namespace mx::cuda {

// K splits (0 = stream-K over the resident CTAs), resident CTAs per SM,
// strips per warp, consumer warps beside a producer warp (0 = 8 warps and
// thread 0 refills the ring between its MMAs).
struct RingPlan {
  int splits, ctas, strips, ring_warps = 0;
};

// H200, 2026-12-01 (bench/mxfp4/results-dense-wide-2026-12-01-s7.md, one
// call): stream-K wherever the row blocks fill the GPU or the tokens are few:
// 36864x7168 at 32 / 64 tokens 71.3 / 95.0 us (3 CTAs per SM 76.6 at 32; K
// splits in clusters: 83.4-127.9 / 98.3-191.4), 7168x18432 at 32 tokens 44.8
// (3 per SM 49.2, splits 51.1-84.7). 56 row blocks at 64 tokens: 2 K splits,
// 1 CTA per SM (59.6 us vs stream-K 65.8 with 1 per SM, 70.9 with 2): its
// 112 CTAs keep a deeper ring, and stream-K cuts each row block into ~5
// partial segments there.
// Session 8 (results-dense-wide-2026-12-01-s8.md; the session's final call,
// bench/gpu/2026-12-01-session8/final/): stream-K with a producer warp, 16
// consumer warps (1 CTA per SM, 256-row CTAs) when there is at least one
// 256-row block per SM, else 8 (2 CTAs per SM): 36864x7168 at 32 / 64 tokens
// 58.8 / 80.4 us vs 65.2 / 88.7 without the producer, 7168x18432 at 32
// tokens 39.7 vs 42.2. Session 22 (bench/mxfp4/results-ring-flush-2026-12-03-s22.md,
// one H200 call): once a cut row block was summed by its owner from
// coalesced partials, stream-K with the producer beat K splits at 64 tokens
// on few row blocks too: 7168x18432 (56 blocks, ~5 CTAs per row block) 42.9
// vs 61.4 us, 4096x7168 (32 blocks) 21.8 vs 46.6, 7168x2048 17.4 vs 20.0
// (events). An owner adds its contributors' partials one after another, so
// above 32 tokens stream-K is kept to at most ~8 CTAs per row block (blocks
// x 8 >= resident CTAs); fewer row blocks (not measured) keep K splits.
// `blocks` = 128-row blocks (N / 128), `stages` = K / 128, `sms` = the
// device's SMs.
// Consumer warps beside the producer (session 8, above): 16 (256-row CTAs,
// one per SM) when N % 256 == 0 and there is a 256-row block per SM, else 8.
inline int ring_consumer_warps(int64_t blocks, int sms) { return blocks % 2 == 0 && blocks / 2 >= sms ? 16 : 8; }

inline RingPlan choose_ring_plan(int64_t blocks, int stages, int M, int sms) {
  if (M <= 32 || blocks * 8 >= 2 * int64_t(sms)) return {0, 2, 1, ring_consumer_warps(blocks, sms)};
  int splits = 1;
  while (splits < 8 && blocks * splits * 5 < sms * 4 && stages / (2 * splits) >= 4) splits *= 2;
  return {splits, 1, 1, 0};
}

// W4A4 on FP8 tensor cores (GemmConfig::fp8, the ring kernel's FP8 variant)
// instead of the quantize-dequantize and the BF16 kernels, for a weight with
// the FP8 layout (CLI --w4a4-mma fp8). H200, session 24, graphs of 16
// launches (bench/mxfp4/results-dense-fp8-2026-12-03-s24.md, call 9):
// 36864x7168 at 12 / 16 / 32 / 64 tokens 42.2 / 42.4 / 47.5 / 62.4 us
// against 46.1 / 47.1 / 54.0 / 68.8, 7168x18432 at 32 / 64 28.7 / 38.1
// against 33.3 / 42.9, 4096x7168 at 64 18.4 against 25.4. At 12-16 tokens
// only the large weights gain: 7168x18432 25.4 / 25.5 against 27.1 / 27.5
// since session 25 loads the row scales a segment ahead (call 3; before,
// 26.4 / 26.5, a tie in session 24's call 7), 4096x7168 at 16 12.4
// against 10.8 (session 25, call 1), so from 64 M weights (N x K) up, as
// kernel 9's rule. `rows` = N, `cols` = K.
inline bool fp8_dense_chosen(int64_t rows, int64_t cols, int M) {
  if (M < 12 || M > 64) return false;
  return M > 16 || rows * cols >= (int64_t(1) << 26);
}

}  // namespace mx::cuda
