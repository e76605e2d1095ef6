// Scratch of the stream-K dense kernels: kernel 10 (mxfp4_gemm_small_streamk.cu:
// FP32 partial sums of the warps whose K range ends or starts inside a strip
// group, and one arrival counter per group) and kernel 11 (mxfp4_gemm_ws.cu:
// the permuted x of a pass, 64 token rows x K, then its stream-K partials and
// counters; ~15 MB + 128 K bytes per stream on an H200).
//
// mxfp4_gemm takes no workspace argument, so the scratch is kept here, one per
// (device, stream): launches on one stream run one after another, so they can
// share it; launches on different streams get different scratch and may run
// at the same time. A launch leaves every counter at zero (kernel 10: the last
// arrival of each group resets its counter; kernel 11: the owner of each cut
// row block), so the next launch needs no clearing. Two launches must never
// share one scratch at the same time (kernel 11's owners trap on counts they
// do not expect).
// Buffers are allocated outside stream capture only and never freed (a
// recorded CUDA graph keeps the addresses it was captured with); a bigger
// need allocates a new buffer beside the old one.
#pragma once
#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

namespace mx::cuda {

struct StreamKWorkspace {
  float* partials = nullptr;  // at least the bytes asked for
  int* counters = nullptr;    // at least the counters asked for, all zero between launches
};

// The current device's scratch for `stream` with room for `partial_bytes` and
// `counters` counters, allocated or grown as needed. False (nothing changed)
// when it is too small and `stream` is being captured: a capture cannot
// allocate; the caller then runs a kernel that needs no scratch.
bool streamk_workspace(cudaStream_t stream, size_t partial_bytes, int64_t counters,
                       StreamKWorkspace& out);

}  // namespace mx::cuda
