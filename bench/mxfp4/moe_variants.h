// The fused-MoE variants mxfp4_bench times at each token count (moe_bench.cu):
// which MoeConfig settings get a row, in which order, and which of them also
// get a CUDA-graph row. Host code only, apart from the bench, so the lists can
// be read and compared without a GPU.
#pragma once
#include <vector>

namespace mxbench {

// MoeConfig fields per variant; all 0 = auto (also timed as a CUDA graph).
struct Variant {
  const char* label;
  int path, down_ks, loads, pdl;
  bool w4a4 = false;   // MoeWeights::w4a4: checked against ref4
  int ws_down = 0;     // MoeConfig::ws_down_epilogue (path 5)
  int ws_depth = 0;    // MoeConfig::ws_gate_up_depth (path 5)
  int gate_up_ks = 0;  // MoeConfig::gate_up_k_slices
  bool x_pre = false;  // W4A4: x quantized by the caller (MoeConfig::x_quantized), as CudaOps does
  int ws_ctas = 0;     // MoeConfig::ws_ctas (path 5)
  int ws_dequant = 0;  // MoeConfig::ws_dequant (path 5)
  int ws_items = 0;    // MoeConfig::ws_gate_up_items (path 5)
  int ws_box = 0;      // MoeConfig::ws_box_rows (path 5)
  int gu_cluster = 0;  // MoeConfig::ws_gate_up_cluster (path 5)
  int down_items = 0;  // MoeConfig::ws_down_items (path 5)
  bool before = false;  // the decode rule before the wide kernels (2026-11-30)
};

// The variants timed at T tokens, in row order; `decode` (--decode,
// --moe-decode) leaves out the bulk-ring and ring rows.
std::vector<Variant> moe_variants(int T, bool decode);

// Whether `v` at T tokens also gets a row replayed from a CUDA graph.
bool gets_graph_row(const Variant& v, int T);

}  // namespace mxbench
