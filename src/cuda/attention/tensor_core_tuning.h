// Benchmark knob of the tensor-core prefill kernel (tensor_core_attention.cu),
// plain C++ so host code can set it: 64-row query tiles per block (1-3; 3 is
// taken as 2 for 192-wide heads), or 0 for the automatic choice (3 up to
// 128-wide BF16 heads, 2 for 192/128, 1 for F32/FP8 caches). Process-wide;
// attention_bench's --tc-tiles flag sets it to compare the variants in one
// run. Throws mx::InvalidArgument outside 0-3.
#pragma once

namespace mx::cuda {

void set_tensor_core_tiles_per_block(int tiles);

}  // namespace mx::cuda
