// E2M1 magnitude rounding shared by the MXFP4 quantizers on the GPU (the W4A4
// activation quantize-dequantize of mxfp4_prep.cu and of the CUDA backend's
// F32 path): the grid {0, 0.5, 1, 1.5, 2, 3, 4, 6} with ties to the even code,
// as host/mxfp4_reference.cc round_to_e2m1_magnitude and core/dtype.cc f32_to_e2m1.
#pragma once

namespace mx::cuda {

__device__ __forceinline__ float e2m1_round_magnitude(float v) {
  if (v <= 0.25f) return 0.f;
  if (v < 0.75f) return 0.5f;
  if (v <= 1.25f) return 1.f;
  if (v < 1.75f) return 1.5f;
  if (v <= 2.5f) return 2.f;
  if (v < 3.5f) return 3.f;
  if (v <= 5.0f) return 4.f;
  return 6.f;
}

}  // namespace mx::cuda
