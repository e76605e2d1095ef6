// Host re-layout helpers for the bench, behind a C++17-friendly interface (the
// .cu files compile as C++17; host/mxfp4_layout.h uses C++20 std::span).
#pragma once
#include <cstdint>
#include <vector>

namespace mxbench {

// pack_mxfp4 on the host; returns false (with no output) on refusal.
bool host_pack(const std::vector<uint8_t>& codes, const std::vector<uint8_t>& scales, int64_t N,
               int64_t K, std::vector<uint8_t>& packed_codes, std::vector<uint8_t>& packed_scales);

std::vector<int64_t> gate_up_order(int64_t intermediate);

// BF16 activations [M, K] for the W4A4 quantizers' bit-exactness checks: random
// values with exponents spread over 2^-20..2^20, then the first `adversarial`
// 32-blocks (at most M * K / 32) cycle through all equal, one outlier,
// subnormal range, E2M1 midpoints of both signs, midpoints x 4 with a 24, zeros.
std::vector<uint16_t> quantizer_check_input(int M, int K, uint64_t seed, int adversarial);

}  // namespace mxbench
