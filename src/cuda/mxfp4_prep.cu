// Preparation kernels: the W4A4 activation quantize-dequantize, the device
// re-layout of checkpoint weights into the kernel layout, and the dense W4A4
// FP8 layout made from it (host/fp8_dense_layout.h).
#include <cuda_runtime.h>

#include "core/error.h"
#include "cuda/cuda_check.h"
#include "cuda/e2m1_round.cuh"
#include "cuda/host/fp8_dense_layout.h"
#include "cuda/mxfp4_device.cuh"
#include "cuda/mxfp4_kernels.h"
#include "cuda/mxfp4_qdq.cuh"

namespace mx::cuda {

namespace {


// Four threads per 32-element block, 8 values (16 bytes) each; the block amax
// meets over the 4 lanes with two shuffles. (One thread per block measured ~6 us
// at M <= 8: too few threads, long serial chains.)
__global__ void qdq_kernel(const uint16_t* __restrict__ x, uint16_t* __restrict__ y, int64_t blocks) {
  const int64_t q = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;  // quarter-block index
  const bool valid = q < blocks * 4;
  // blockDim is a multiple of 32 and blocks start at multiples of 4 lanes, so
  // every lane takes part in qdq_quarter's shuffles (invalid ones with zeros).
  const uint4 o = dev::qdq_quarter(valid ? reinterpret_cast<const uint4*>(x)[q] : make_uint4(0, 0, 0, 0));
  if (valid) reinterpret_cast<uint4*>(y)[q] = o;
}

// One thread per output code word: a code's 4 bits spread over the word's
// bytes (host/mxfp4_bits.h), so the thread gathers all 8 codes of its word
// (no write races).
__global__ void pack_codes_kernel(const uint8_t* __restrict__ codes, int64_t N, int64_t K,
                                  const int64_t* __restrict__ order, uint32_t* __restrict__ out) {
  const int64_t word = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (word >= N * K / 8) return;
  uint32_t v = 0;
#pragma unroll
  for (int c = 0; c < 8; ++c) {
    int64_t r, k;
    kernel_code_source(word * 4, c, K, r, k);
    const int64_t src_row = order ? order[r] : r;
    const uint32_t code = (codes[src_row * (K / 2) + k / 2] >> (4 * (k & 1))) & 0xF;
    v |= place_code(code, c);
  }
  out[word] = v;
}

__global__ void pack_scales_kernel(const uint8_t* __restrict__ scales, int64_t N, int64_t K,
                                   const int64_t* __restrict__ order, uint8_t* __restrict__ out) {
  const int64_t byte = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (byte >= N * K / kBlockK) return;
  int64_t r, kb;
  kernel_scale_source(byte, K, r, kb);
  const int64_t src_row = order ? order[r] : r;
  out[byte] = scales[src_row * (K / kBlockK) + kb];
}

// One thread per lane chunk (16 bytes) of a tile: the lane's codes moved to
// the FP8 dense layout.
__global__ void repack_fp8_dense_kernel(const uint4* __restrict__ in, uint4* __restrict__ out, int64_t chunks) {
  const int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= chunks) return;
  const uint4 v = in[i];
  const uint32_t w[4] = {v.x, v.y, v.z, v.w};
  uint32_t o[4];
  fp8_dense_repack_lane(w, o);
  out[i] = make_uint4(o[0], o[1], o[2], o[3]);
}

// One thread per row: its largest scale byte (kernel scale layout), and the
// count of its blocks with a nonzero code further below it than the kernel's
// fast fold table reaches (kFp8FoldFastMinDelta) added to *slow (a block of
// zeros folds to zeros at any scale).
__global__ void row_smax_kernel(const uint8_t* __restrict__ codes, const uint8_t* __restrict__ scales, int64_t N,
                                int64_t K, uint8_t* __restrict__ row_smax, int* __restrict__ slow) {
  const int64_t r = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (r >= N) return;
  int smax = 0;
  for (int64_t kb = 0; kb < K / kBlockK; ++kb) smax = max(smax, int(scales[kernel_scale_slot(r, kb, K)]));
  int below = 0;
  for (int64_t kb = 0; kb < K / kBlockK; ++kb)
    below += int(scales[kernel_scale_slot(r, kb, K)]) - smax < kFp8FoldFastMinDelta &&
             kernel_block_has_magnitude(codes, r, kb, K);
  row_smax[r] = uint8_t(smax);
  if (below) atomicAdd(slow, below);
}

unsigned blocks_for(int64_t n, int threads) { return unsigned((n + threads - 1) / threads); }

}  // namespace

void mxfp4_qdq_activations(const uint16_t* x, uint16_t* xq, int M, int K, cudaStream_t stream) {
  if (K % kBlockK) fail_input("mxfp4_qdq_activations: K={} is not a multiple of 32", K);
  const int64_t blocks = int64_t(M) * K / kBlockK;
  if (blocks == 0) return;
  qdq_kernel<<<blocks_for(blocks * 4, 128), 128, 0, stream>>>(x, xq, blocks);
  MX_CUDA_CHECK(cudaGetLastError());
}

void pack_mxfp4_device(const uint8_t* codes, const uint8_t* scales, int64_t N, int64_t K,
                       const int64_t* row_order, uint8_t* packed_codes, uint8_t* packed_scales,
                       cudaStream_t stream) {
  if (N <= 0 || N % kStripRows || K <= 0 || K % kTileK)
    fail_input("pack_mxfp4_device: needs N % 16 == 0 and K % 64 == 0, got N={} K={}", N, K);
  if (reinterpret_cast<uintptr_t>(packed_codes) % 4)
    fail_input("pack_mxfp4_device: packed codes must be 4-byte aligned (written as 32-bit words)");
  pack_codes_kernel<<<blocks_for(N * K / 8, 256), 256, 0, stream>>>(
      codes, N, K, row_order, reinterpret_cast<uint32_t*>(packed_codes));
  MX_CUDA_CHECK(cudaGetLastError());
  pack_scales_kernel<<<blocks_for(N * K / kBlockK, 256), 256, 0, stream>>>(scales, N, K, row_order, packed_scales);
  MX_CUDA_CHECK(cudaGetLastError());
}

void pack_fp8_dense_device(const Mxfp4DeviceWeight& w, uint8_t* fp8_codes, uint8_t* row_smax, int* slow_blocks,
                           cudaStream_t stream) {
  if (w.rows <= 0 || w.rows % kStripRows || w.cols <= 0 || w.cols % kTileK)
    fail_input("pack_fp8_dense_device: needs N % 16 == 0 and K % 64 == 0, got N={} K={}", w.rows, w.cols);
  if (reinterpret_cast<uintptr_t>(fp8_codes) % 16 || reinterpret_cast<uintptr_t>(w.codes) % 16)
    fail_input("pack_fp8_dense_device: codes must be 16-byte aligned");
  const int64_t chunks = w.rows * w.cols / 2 / 16;
  repack_fp8_dense_kernel<<<blocks_for(chunks, 256), 256, 0, stream>>>(
      reinterpret_cast<const uint4*>(w.codes), reinterpret_cast<uint4*>(fp8_codes), chunks);
  MX_CUDA_CHECK(cudaGetLastError());
  MX_CUDA_CHECK(cudaMemsetAsync(slow_blocks, 0, sizeof(int), stream));
  row_smax_kernel<<<blocks_for(w.rows, 128), 128, 0, stream>>>(w.codes, w.scales, w.rows, w.cols, row_smax,
                                                                 slow_blocks);
  MX_CUDA_CHECK(cudaGetLastError());
}

}  // namespace mx::cuda
