// Dense MXFP4 GEMM on wgmma with the weights and activations streamed by bulk
// copies through an mbarrier ring (GemmConfig kernel 11, mxfp4_gemm_ws.cu);
// entry points for mxfp4_gemm's dispatch (not public).
#pragma once
#include <cuda_runtime_api.h>

#include <cstdint>

#include "cuda/mxfp4_kernels.h"

namespace mx::cuda {

// N % 128 == 0 and K % 128 == 0 (whole stages of 2 K tiles).
bool dense_ws_supported(const Mxfp4DeviceWeight& w);

// launch_dense_ws's `mode`: the kernel, or a timing probe (bench only).
enum DenseRingMode : int {
  kRingProduction = 0,
  kRingProbeNoMma = 1,        // loads and dequant, no wgmma
  kRingProbeNoDequant = 2,    // loads and wgmma on the code words, no dequant
  kRingProbeCopies = 3,       // the ring's copies alone (weights and B)
  kRingProbeWeightsOnly = 4,  // the weights' copies alone
  kRingProbeBOnly = 5,        // B's copies alone
  kRingProbeWeightsNoFlush = 6,  // the weights' copies alone, no stream-K segment ends (nothing stored)
  kRingProbeDropCut = 7,         // the kernel with the row blocks cut between CTAs left out
  kRingProbeStoreCut = 8,        // the kernel with their parts stored (the owners' too), never counted or summed
  kRingProbeNoWholeY = 9,        // the kernel without the whole row blocks' y stores (cut ones as the kernel)
  kRingProbeNoEnds = 10,         // the kernel without segment ends: MMAs drained, nothing stored or summed
};
constexpr int kRingLastMode = kRingProbeNoEnds;
// A mode's name in bench rows and profile logs.
inline const char* ring_mode_name(int mode) {
  switch (mode) {
    case kRingProduction: return "kernel";
    case kRingProbeNoMma: return "PROBE no MMA";
    case kRingProbeNoDequant: return "PROBE no dequant";
    case kRingProbeCopies: return "PROBE copies only";
    case kRingProbeWeightsOnly: return "PROBE weight copies only";
    case kRingProbeBOnly: return "PROBE B copies only";
    case kRingProbeWeightsNoFlush: return "PROBE weight copies only, no segment ends";
    case kRingProbeDropCut: return "PROBE kernel, cut row blocks dropped";
    case kRingProbeStoreCut: return "PROBE kernel, cut row blocks stored, not summed";
    case kRingProbeNoWholeY: return "PROBE kernel, whole row blocks' y not stored";
    case kRingProbeNoEnds: return "PROBE kernel, no segment ends (nothing stored)";
    default: return "unknown mode";
  }
}

// y[M, N] = x[M, K] * W^T; any M (passes of up to 64 tokens). k_splits: CTAs
// (one cluster) that split K, 1, 2, 4 or 8, or 0 = stream-K over the resident
// CTAs; ctas_per_sm: resident CTAs per SM the ring is sized for, 1 (deeper
// ring), 2 or 3 (up to 32 tokens); strips_per_cta: 8 (one per warp) or 16
// (two per warp, N % 256 == 0, up to 32 tokens, at most 2 CTAs per SM);
// ring_warps: 8 (2 CTAs per SM) or 16 (1 CTA per SM, N % 256 == 0) consumer
// warps of one strip each plus a producer warp that fills the ring, stream-K
// (k_splits and ctas_per_sm 0, strips_per_cta 0, or 32 with 16 consumer
// warps: two strips per warp, N % 512 == 0, up to 32 tokens, small scales),
// or 0 = thread 0 refills the ring; all four 0 = chosen from the shape.
// mode (with a producer warp, one strip per warp, small scales, 17..64
// tokens a pass): the kernel,
// or a timing probe that leaves out part of the work and leaves y wrong
// (bench only: where the time goes).
// Each pass first writes x in the MMA's layout into the stream's scratch
// (streamk_workspace). False, with nothing launched, when that scratch is
// too small and cannot grow (the stream is being captured): the caller then
// runs another kernel.
bool launch_dense_ws(const Mxfp4DeviceWeight& w, const uint16_t* x, int M, uint16_t* y,
                     cudaStream_t stream, int k_splits, int ctas_per_sm, int strips_per_cta, int ring_warps,
                     int mode = kRingProduction);

}  // namespace mx::cuda
