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
  const uint8_t* codes = nullptr;   // N * K / 2 bytes, kernel layout
  const uint8_t* scales = nullptr;  // N * K / 32 bytes, kernel layout
  int64_t rows = 0, cols = 0;       // N, K
  bool big_scales = false;          // some scale byte > 128 (pack_mxfp4 reports it)
};

// Kernel choices. 0 = chosen from the shape (see docs/kernels.md); the bench
// and the CLI can force them.
// Compiled pairs: up to 16 tokens (1,4) (1,8) (1,16); more tokens (1,4) (2,4)
// (4,2).
struct GemmConfig {
  int strips_per_cta = 0;  // 16-row strips per CTA (they share activations)
  int k_slices = 0;        // warps per strip, each a slice of K, summed in shared memory
};

// y[M, N] (BF16) = x[M, K] (BF16) * W^T for MXFP4 W: W4A16, FP32 accumulate.
// M is any positive count (decode-shaped: M <= 64 keeps all tokens in one
// pass; larger M loops over groups of 64). Asynchronous on `stream`.
void mxfp4_gemm(const Mxfp4DeviceWeight& w, const uint16_t* x, int M, uint16_t* y,
                cudaStream_t stream, GemmConfig config = {});

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

// Fused MoE for decode: routing output -> per-expert token lists on the GPU ->
// gate_up grouped GEMM with SiLU(gate) * up fused -> down grouped GEMM with the
// routing weights, accumulated into `out` (FP32 [T, H], overwritten). Three
// launches, no host synchronization, capturable in a CUDA graph.
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
};

// Bytes of scratch fused_moe_decode needs for up to `max_tokens` tokens.
size_t fused_moe_workspace_bytes(const MoeWeights& w, int max_tokens, int topk);

// Kernel choices, 0 = from the shape. down_k_slices: warps per 16-row strip
// of the down projection (1 or 4; 4 = more, shorter warps for few tokens);
// gate_up_k_slices: warps per gate_up strip (4 or 8).
struct MoeConfig {
  int down_k_slices = 0;
  int gate_up_k_slices = 0;
};

// x: BF16 [T, H]; topk_ids: int32 [T, topk] (ids outside [0, E) are dropped);
// topk_weights: FP32 [T, topk]; workspace: fused_moe_workspace_bytes, 256-byte aligned.
void fused_moe_decode(const MoeWeights& w, const uint16_t* x, const int* topk_ids,
                      const float* topk_weights, int T, int topk, float* out, void* workspace,
                      cudaStream_t stream, MoeConfig config = {});

}  // namespace mx::cuda
