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

}  // namespace mxbench
