// Bulk tensor copies (TMA, sm_90): the host encodes a 2-D tensor map once
// per launch; one thread copies a box of it into this CTA's shared memory,
// completing on an mbarrier (mxfp4_device.cuh has the barrier helpers). Used
// by the warp-specialized kernels.
#pragma once
#include <cuda.h>
#include <cudaTypedefs.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "core/error.h"
#include "cuda/cuda_check.h"

namespace mx::cuda {

// cuTensorMapEncodeTiled through the runtime's driver entry point (nothing
// new to link); looked up once per process. `who` names the caller in errors.
inline PFN_cuTensorMapEncodeTiled_v12000 tensor_map_encoder(const char* who) {
  static void* const fn = [] {
    void* f = nullptr;
    cudaDriverEntryPointQueryResult status;
    MX_CUDA_CHECK(cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &f, 12000, cudaEnableDefault, &status));
    return status == cudaDriverEntryPointSuccess ? f : nullptr;
  }();
  if (!fn) fail_input("{}: the driver has no cuTensorMapEncodeTiled", who);
  return reinterpret_cast<PFN_cuTensorMapEncodeTiled_v12000>(fn);
}

// A 2-D map of `rows` rows of `row_bytes` bytes (8-byte elements, no swizzle)
// whose box is `box_cols` elements x `box_rows` rows; rows past the end read
// as zeros.
inline CUtensorMap tensor_map_2d(const char* who, const void* ptr, uint64_t row_bytes, uint64_t rows,
                                 uint32_t box_cols, uint32_t box_rows) {
  CUtensorMap map;
  const cuuint64_t dims[2] = {row_bytes / 8, rows};
  const cuuint64_t strides[1] = {row_bytes};
  const cuuint32_t box[2] = {box_cols, box_rows};
  const cuuint32_t elem_strides[2] = {1, 1};
  const CUresult r = tensor_map_encoder(who)(&map, CU_TENSOR_MAP_DATA_TYPE_UINT64, 2, const_cast<void*>(ptr), dims,
                                             strides, box, elem_strides, CU_TENSOR_MAP_INTERLEAVE_NONE,
                                             CU_TENSOR_MAP_SWIZZLE_NONE, CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
                                             CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  if (r != CUDA_SUCCESS)
    fail_input("{}: cuTensorMapEncodeTiled failed ({}) for {} rows of {} bytes", who, int(r), rows, row_bytes);
  return map;
}

}  // namespace mx::cuda

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

// The same box into shared memory at `dst` of every CTA of the cluster in
// `cta_mask` (bit i = CTA rank i), counted on the barrier at `bar` in each.
__device__ __forceinline__ void tma_2d_multicast(uint32_t dst, const CUtensorMap& map, int c0, int c1, uint32_t bar,
                                                 uint16_t cta_mask) {
  asm volatile(
      "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes.multicast::cluster"
      " [%0], [%1, {%2, %3}], [%4], %5;" ::"r"(dst),
      "l"(reinterpret_cast<uint64_t>(&map)), "r"(c0), "r"(c1), "r"(bar), "h"(cta_mask)
      : "memory");
}

}  // namespace mx::cuda::dev
