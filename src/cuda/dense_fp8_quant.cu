// The dense FP8 path's activation quantizer (dense_fp8_quant.h).
#include <cuda_runtime.h>

#include "core/error.h"
#include "cuda/cuda_check.h"
#include "cuda/dense_fp8_quant.h"
#include "cuda/host/fp8_fold.h"
#include "cuda/host/mxfp4_bits.h"
#include "cuda/kernel_launch.cuh"
#include "cuda/mxfp4_device.cuh"
#include "cuda/w4a4_fp8_device.cuh"

namespace mx::cuda {

namespace {

// W4A4 on FP8 MMAs: x quantized per 32-block to MXFP4 (bit-exact to the
// reference quantizer) and folded into E4M3 per ring stage of 128 K
// (host/fp8_fold.h with the stage's four blocks as the "row": d = s - the
// stage's largest scale), written in the FP8 MMA's K order
// (fp8_dense_mma_col) into the chunk layout [stage][K tile][16-wide
// chunk][NT rows][16 bytes], each stage followed by its tokens' unfold
// factors (fp8_x_stage_bytes; rows M..NT-1: zeros, factor 0); the GEMM
// applies them when it adds a stage's sum into FP32. Thread = 8 values; a stage of a
// token is 16 lanes, so nothing waits for a whole row: a launch of small
// CTAs that fits beside the GEMM's on an SM. (Folding per token row needed
// the row's largest scale first: one CTA per row, 512 threads held in
// registers, could not share an SM with the GEMM's CTA and cost 1.5-6.1 us
// in a chain of launches, a cluster of 8 CTAs per row more; session 24.)
constexpr int kQuantThreads = 256;
template <int NT>
__global__ void __launch_bounds__(kQuantThreads) quantize_x_fp8_kernel(const uint16_t* __restrict__ x,
                                                                        uint8_t* __restrict__ xp, int M, int K) {
  dev::griddep_launch_dependents();  // the GEMM may start its weight copies now
  // Launched under programmatic dependent launch: the previous kernel (x's
  // writer, or the previous GEMM still reading xp) is done from here on.
  dev::griddep_wait();
  const int pieces = K / 8;          // a multiple of 16: whole stages
  const int64_t id = int64_t(blockIdx.x) * kQuantThreads + threadIdx.x;
  const bool valid = id < int64_t(NT) * pieces;
  const int n = valid ? int(id / pieces) : 0, p = valid ? int(id % pieces) : 0;
  const uint4 v = valid && n < M ? reinterpret_cast<const uint4*>(x + size_t(n) * K)[p] : make_uint4(0, 0, 0, 0);
  const int sb = dev::fp8_piece_scale(v);  // every lane takes part in the shuffles
  int smax = max(sb, __shfl_xor_sync(0xffffffffu, sb, 4));
  smax = max(smax, __shfl_xor_sync(0xffffffffu, smax, 8));  // the 16 lanes of the stage
  if (!valid) return;
  uint32_t b[8];
  dev::fp8_piece_fold(v, sb, smax, b);
  // Real columns 16t + 8s + {0..3} go to chunk 2s, + {4..7} to chunk 2s + 1,
  // bytes 4t .. 4t + 3 of the row (fp8_dense_mma_col).
  const int k0 = 8 * p, j = k0 / kTileK, t = (k0 >> 4) & 3, s2 = 2 * ((k0 >> 3) & 1);
  uint8_t* stage = xp + size_t(j / kRingStageTiles) * fp8_x_stage_bytes(NT);
  uint8_t* dst = stage + (((j % kRingStageTiles) * 4 + s2) * NT + n) * 16 + 4 * t;
  *reinterpret_cast<uint32_t*>(dst) = b[0] | b[1] << 8 | b[2] << 16 | b[3] << 24;
  *reinterpret_cast<uint32_t*>(dst + NT * 16) = b[4] | b[5] << 8 | b[6] << 16 | b[7] << 24;
  if (p % 16 == 0)
    reinterpret_cast<float*>(stage + fp8_x_b_bytes(NT))[n] = n < M ? fold_unscale(smax) : 0.f;
}

template <int NT>
void launch_quantize_x_fp8(const uint16_t* x, int M, int K, uint8_t* xp, cudaStream_t stream) {
  const int64_t threads = int64_t(NT) * (K / 8);
  launch_with(quantize_x_fp8_kernel<NT>, dim3(unsigned((threads + kQuantThreads - 1) / kQuantThreads)), kQuantThreads,
              0, stream, LaunchAttrs{true}, x, xp, M, K);
}

}  // namespace

void quantize_x_fp8(const uint16_t* x, int M, int NT, int K, uint8_t* xp, cudaStream_t stream) {
  if (K <= 0 || K % (kRingStageTiles * kTileK) || K > kDenseFp8MaxK || M < 1 || M > NT)
    fail_input("quantize_x_fp8: K={} (multiple of {}, <= {}), M={} (1..NT)", K, kRingStageTiles * kTileK, kDenseFp8MaxK, M);
  if (NT == 16) launch_quantize_x_fp8<16>(x, M, K, xp, stream);
  else if (NT == 32) launch_quantize_x_fp8<32>(x, M, K, xp, stream);
  else if (NT == 64) launch_quantize_x_fp8<64>(x, M, K, xp, stream);
  else fail_input("quantize_x_fp8: NT is 16, 32 or 64, got {}", NT);
  MX_CUDA_CHECK(cudaGetLastError());
}

}  // namespace mx::cuda
