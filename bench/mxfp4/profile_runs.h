// mxfp4_bench's --profile runs (profile_runs.cu): two launches of each chosen
// kernel on fresh random inputs, for a profiler.
#pragma once
#include <cuda_runtime_api.h>

#include <cstdint>

namespace mxbench {

using SeedFn = uint64_t (*)();  // the bench's seed sequence

// --profile: the decode strip kernels 1, 5 and 4 on the two dense shapes at M = 1.
void profile_run(cudaStream_t s, SeedFn next_seed);
// --profile --dense: the ring kernel 11 (auto, 8 and 16 consumer warps) at M = 32 and 64.
void profile_dense_run(cudaStream_t s, SeedFn next_seed);
// --profile --moe-decode: the fused MoE at 1 token, before / wide / wide W4A4.
void profile_moe_decode_run(cudaStream_t s, SeedFn next_seed);
// --profile --dense-small: the automatic kernels on both large shapes at M = 8 and 16.
void profile_small_run(cudaStream_t s, SeedFn next_seed);

}  // namespace mxbench
