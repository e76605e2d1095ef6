// W4A4 activation quantizer for the FP8 prefill (w4a4_fp8.h): MXFP4 codes and
// scales bit-exact to the host reference, written as folded E4M3 bytes in the
// FP8 MMA's K order, with each row's largest scale byte.
#include <cuda_runtime.h>

#include "core/error.h"
#include "cuda/e2m1_round.cuh"
#include "cuda/cuda_check.h"
#include "cuda/host/fp8_fold.h"
#include "cuda/mxfp4_device.cuh"
#include "cuda/w4a4_fp8.h"
#include "cuda/w4a4_fp8_device.cuh"

namespace mx::cuda {

namespace {

constexpr int kThreads = 256;
constexpr int kItems = kFp8QuantMaxK / 8 / kThreads;  // 8-value pieces per thread: 4

}  // namespace

namespace {

// One CTA per row; thread piece p = 8 consecutive values; lanes 4k..4k+3
// hold one 32-block (amax over two shuffles, as mxfp4_prep.cu's qdq_kernel).
// Every piece of the row is loaded before the barrier, so q may alias x.
__global__ void __launch_bounds__(kThreads) quantize_fold_kernel(const uint16_t* __restrict__ x,
                                                                 int K, uint8_t* q,
                                                                 int64_t q_stride,
                                                                 uint8_t* __restrict__ scales) {
  __shared__ uint32_t warp_max[kThreads / 32];
  const int row = blockIdx.x, pieces = K / 8;
  const uint16_t* xr = x + size_t(row) * K;
  uint4 v[kItems];
  int sb[kItems];
  uint32_t local_max = 0;
#pragma unroll
  for (int i = 0; i < kItems; ++i) {
    const int p = threadIdx.x + i * kThreads;
    const bool valid = p < pieces;
    v[i] = valid ? reinterpret_cast<const uint4*>(xr)[p] : make_uint4(0, 0, 0, 0);
    sb[i] = dev::fp8_piece_scale(v[i]);
    if (valid) local_max = max(local_max, uint32_t(sb[i]));
  }
  local_max = __reduce_max_sync(0xffffffffu, local_max);
  if ((threadIdx.x & 31) == 0) warp_max[threadIdx.x >> 5] = local_max;
  __syncthreads();
  uint32_t smax = 0;
#pragma unroll
  for (int w = 0; w < kThreads / 32; ++w) smax = max(smax, warp_max[w]);
  uint8_t* qr = q + row * q_stride;
#pragma unroll
  for (int i = 0; i < kItems; ++i) {
    const int p = threadIdx.x + i * kThreads;
    if (p >= pieces) break;
    uint32_t byte[8];
    dev::fp8_piece_fold(v[i], sb[i], int(smax), byte);
    // Real columns kin..kin+7 (kin = 16t + 4kk, kk even) of a 64-tile go to
    // MMA columns 32 (kk / 2) + 4t + {0, 2, 1, 3} and the same + 16.
    const int k0 = 8 * p, kin = k0 & 63, t = kin >> 4, kk = (kin >> 2) & 3;
    uint8_t* dst = qr + (k0 & ~63) + 32 * (kk >> 1) + 4 * t;
    *reinterpret_cast<uint32_t*>(dst) = byte[0] | byte[2] << 8 | byte[1] << 16 | byte[3] << 24;
    *reinterpret_cast<uint32_t*>(dst + 16) = byte[4] | byte[6] << 8 | byte[5] << 16 | byte[7] << 24;
    if (scales && (p & 3) == 0) scales[size_t(row) * (K / 32) + p / 4] = uint8_t(sb[i]);
  }
  if (threadIdx.x == 0) qr[K] = uint8_t(smax);
}

}  // namespace

void w4a4_fp8_quantize_rows(const uint16_t* x, int rows, int K, uint8_t* q, int64_t q_stride,
                            uint8_t* scales, cudaStream_t stream) {
  if (K <= 0 || K % kTileK || K > kFp8QuantMaxK)
    fail_input("w4a4_fp8_quantize_rows: K={} must be a positive multiple of 64 up to {}", K,
               kFp8QuantMaxK);
  if (q_stride < K + 1 || q_stride % 4)
    fail_input("w4a4_fp8_quantize_rows: row stride {} must hold K + 1 = {} bytes, multiple of 4",
               q_stride, K + 1);
  if (rows <= 0) return;
  quantize_fold_kernel<<<unsigned(rows), kThreads, 0, stream>>>(x, K, q, q_stride, scales);
  MX_CUDA_CHECK(cudaGetLastError());
}

}  // namespace mx::cuda
