// mxfp4_bench's fused-MoE rows (moe_bench.cu): the Kimi-K2.5 layer shape at
// each token count, every variant of moe_variants.h checked and timed.
#pragma once
#include <cuda_runtime_api.h>

#include <vector>

namespace mxbench {

// For each T in Ts: fresh routings and activations, a reference on the
// checked tokens, then one row per variant (CUDA events) and, for some, a row
// replayed from a CUDA graph. E experts; rows go to emit() (bench_rows.h).
void bench_moe(const std::vector<int>& Ts, cudaStream_t s, int E);

}  // namespace mxbench
