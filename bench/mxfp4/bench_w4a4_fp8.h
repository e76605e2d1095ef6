// mxfp4_bench --w4a4-prefill (bench_w4a4_fp8.cu): the W4A4 FP8 MoE prefill
// beside W4A16 path 4 and W4A4 on BF16, quantizer bit-exactness, accuracy.
#pragma once
#include <cuda_runtime_api.h>

#include <cstdint>
#include <vector>

namespace mxbench {

// Prints its rows as it goes and a markdown table at the end.
void bench_w4a4_prefill(const std::vector<int>& tokens, uint64_t seed, double copy_gbps,
                        cudaStream_t stream);

}  // namespace mxbench
