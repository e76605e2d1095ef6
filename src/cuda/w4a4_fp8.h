// W4A4 MoE prefill on FP8 tensor cores (w4a4_fp8_quant.cu, w4a4_fp8_moe.cu;
// docs/w4a4-fp8.md): activations quantized to MXFP4 as the checkpoint's
// contract says, both operands' block scales folded into E4M3 values
// (host/fp8_fold.h), wgmma m64nNk32 E4M3 x E4M3 with FP32 accumulators.
#pragma once
#include <cuda_runtime_api.h>

#include <cstdint>

#include "cuda/mxfp4_internal.h"

namespace mx::cuda {

// Largest K the quantizer takes (one CTA holds a row in registers).
constexpr int kFp8QuantMaxK = 8192;

// Quantizes each BF16 row of x [rows, K] per 32-block to MXFP4 exactly as
// host/mxfp4_reference.h's quantize_block_reference does, and writes the
// folded E4M3 bytes (E2M1 * 2^(s - smax + c), host/fp8_fold.h) in the FP8
// MMA's K order (fp8_logical_col within each 64-wide tile) to
// q + row * q_stride, the row's largest scale byte smax to q[row * q_stride + K],
// and, when `scales` is not null, the block scale bytes to scales [rows, K/32].
// In place is allowed when q == x and q_stride == 2K (a row is read whole
// before it is written). K % 64 == 0, K <= kFp8QuantMaxK.
void w4a4_fp8_quantize_rows(const uint16_t* x, int rows, int K, uint8_t* q, int64_t q_stride,
                            uint8_t* scales, cudaStream_t stream);

// The FP8 prefill of fused_moe_decode, after the router sorted the pairs by
// expert (s.offsets / s.sorted_pairs): quantizes x into s.xp (as E4M3 bytes,
// row stride 2H), gate_up on wgmma E4M3 over wide tiles of up to 192 pairs
// (SiLU(gate) * up in the epilogue, h in BF16), quantizes h in place, down on
// wgmma E4M3 with the routing weights added into out (zeroed by gate_up).
// The FP8 MMAs' sums are added into FP32 accumulators every
// `promote_tiles` (2 or 4) K tiles of 64. Needs H and I multiples of 256, <= 8192.
void launch_moe_prefill_fp8(const MoeWeights& w, const uint16_t* x, int T, int topk,
                            const float* topk_weights, float* out, const MoeScratch& s,
                            cudaStream_t stream, int promote_tiles);

}  // namespace mx::cuda
