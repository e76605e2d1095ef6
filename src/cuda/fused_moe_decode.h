// Wide-CTA decode kernels of the fused MoE (MoeConfig::weight_loads 6,
// fused_moe_decode.cu), called by fused_moe_decode after its checks (and,
// on the routed path, after the router).
#pragma once
#include <cuda_runtime_api.h>

#include <cstdint>

#include "cuda/mxfp4_internal.h"
#include "cuda/mxfp4_kernels.h"

namespace mx::cuda {

struct WideDecodeConfig {
  bool direct = true;       // direct path (<= 64 pairs, no router) or routed
  bool quantize_x = false;  // W4A4 and x not yet quantized: a quantizer launch first (direct only)
  int gate_up_k_slices = 0; // warps per strip, 1, 2 or 4; 0 = from the shape
  int down_k_slices = 0;    // warps per down strip group, 1, 2 or 4; 0 = auto (2)
  bool pdl = true;          // launch down with programmatic dependent launch
};

// Refuses K-slice requests the wide kernels do not have (0 = from the
// shape; else 1, 2 or 4); fused_moe_decode calls it before its first launch.
void check_wide_decode_slices(int gate_up_k_slices, int down_k_slices);

// gate_up (+SiLU*up, + W4A4's per-32 quantize-dequantize of h in the
// epilogue) and down (+weighted combine into out). The CTA holds 4 strips
// (32 h columns) x k-slices warps; weights stream in 3-tile register batches.
void launch_moe_decode_wide(const MoeWeights& w, const uint16_t* x, const int* ids,
                            const float* topk_weights, int T, int topk, float* out,
                            const MoeScratch& s, cudaStream_t stream, const WideDecodeConfig& c);

}  // namespace mx::cuda
