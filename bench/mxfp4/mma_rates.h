// mxfp4_bench --mma-rates (mma_rates.cu): the issue rates of the tensor-core
// forms and the dequant's integer / half-precision instructions, each alone on
// every SM, with the SM clock of each row.
#pragma once
#include <cuda_runtime_api.h>

namespace mxbench {

void bench_mma_rates(cudaStream_t s);

}  // namespace mxbench
