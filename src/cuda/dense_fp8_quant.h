// The activations of the dense W4A4 GEMM on FP8 tensor cores (kernel 11's
// FP8 variant, mxfp4_gemm_ws.cu; docs/w4a4-fp8.md "Dense linears"): x
// quantized per 32-block to MXFP4, bit-exact to the reference quantizer,
// folded into E4M3 per ring stage of 128 K (host/fp8_fold.h with the stage's
// four blocks as the "row") and written in the ring's B layout, each stage
// followed by its tokens' unfold factors (dense_fp8_quant.cu).
#pragma once
#include <cuda_runtime_api.h>

#include <cstdint>

namespace mx::cuda {

constexpr int kRingStageTiles = 2;     // K tiles of 64 per ring stage (kernel 11)
constexpr int kDenseFp8MaxK = 32768;   // the FP8 path's K limit

// A stage's activations in the scratch (and in a ring slot): its two K tiles
// of E4M3 B ([K tile][16-wide chunk][NT rows][16 bytes]), then the stage's
// unfold factors of the NT tokens, padded to 128 bytes (the weights' tensor
// copies that follow in the slot want 128-byte alignment). One bulk copy
// brings both.
constexpr int fp8_x_b_bytes(int NT) { return kRingStageTiles * 4 * NT * 16; }  // where the factors start
constexpr int fp8_xs_bytes(int NT) { return (NT * 4 + 127) / 128 * 128; }
constexpr int fp8_x_stage_bytes(int NT) { return fp8_x_b_bytes(NT) + fp8_xs_bytes(NT); }

// x [M, K] (BF16: raw, or already quantize-dequantized: same codes) -> xp,
// K / 128 stages of fp8_x_stage_bytes(NT) for NT = 16, 32 or 64 >= M (rows
// M..NT-1 zeros, factor 0); K % 128 == 0, K <= kDenseFp8MaxK. Launched under
// programmatic dependent launch: it waits for the previous kernel before it
// reads x or writes xp.
void quantize_x_fp8(const uint16_t* x, int M, int NT, int K, uint8_t* xp, cudaStream_t stream);

}  // namespace mx::cuda
