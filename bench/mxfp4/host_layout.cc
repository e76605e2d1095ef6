#include "host_layout.h"

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

}  // namespace mxbench
