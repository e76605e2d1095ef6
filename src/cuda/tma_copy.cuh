// Bulk tensor copies (TMA, sm_90): one thread copies a 2-D box of a tensor map
// into this CTA's shared memory, completing on an mbarrier (mxfp4_device.cuh
// has the barrier helpers). Used by the warp-specialized kernels.
#pragma once
#include <cuda.h>

#include <cstdint>

namespace mx::cuda::dev {

// The box of `map` at coordinates (c0, c1) into shared memory at `dst`;
// `bar` counts its bytes.
__device__ __forceinline__ void tma_2d(uint32_t dst, const CUtensorMap& map, int c0, int c1, uint32_t bar) {
  asm volatile(
      "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes"
      " [%0], [%1, {%2, %3}], [%4];" ::"r"(dst),
      "l"(reinterpret_cast<uint64_t>(&map)), "r"(c0), "r"(c1), "r"(bar)
      : "memory");
}

}  // namespace mx::cuda::dev
