#include "host_layout.h"

#include <algorithm>
#include <cmath>
#include <random>

#include "core/dtype.h"
#include "core/error.h"
#include "cuda/host/mxfp4_layout.h"

namespace mxbench {

bool host_pack(const std::vector<uint8_t>& codes, const std::vector<uint8_t>& scales, int64_t N,
               int64_t K, std::vector<uint8_t>& packed_codes, std::vector<uint8_t>& packed_scales) {
  try {
    mx::cuda::PackedMxfp4 p = mx::cuda::pack_mxfp4(codes, scales, N, K, "bench weight");
    packed_codes = std::move(p.codes);
    packed_scales = std::move(p.scales);
    return true;
  } catch (const mx::Error&) {
    return false;
  }
}

std::vector<int64_t> gate_up_order(int64_t intermediate) {
  return mx::cuda::gate_up_interleaved_rows(intermediate);
}

std::vector<uint16_t> quantizer_check_input(int M, int K, uint64_t seed, int adversarial) {
  std::vector<uint16_t> x(size_t(M) * K);
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> nd(0.f, 1.f);
  for (auto& v : x) v = mx::f32_to_bf16(nd(rng) * std::exp2(float(int(rng() % 40) - 20)));
  const float mids[] = {0.25f, 0.75f, 1.25f, 1.75f, 2.5f, 3.5f, 5.f, 6.f, 7.f};
  for (int b = 0; b < std::min(adversarial, M * K / 32); ++b) {
    uint16_t* blk = x.data() + size_t(b) * 32;
    for (int i = 0; i < 32; ++i) {
      float v;
      switch (b % 6) {
        case 0: v = 1.5f; break;
        case 1: v = i == 0 ? 1000.f : 0.01f * (i - 16); break;
        case 2: v = std::ldexp(float(i - 16), -135); break;
        case 3: v = mids[i % 9] * ((i & 1) ? -1.f : 1.f); break;
        case 4: v = (i == 3) ? 6.f * 4 : mids[i % 9] * 4; break;
        default: v = 0.f; break;
      }
      blk[i] = mx::f32_to_bf16(v);
    }
  }
  return x;
}

}  // namespace mxbench
