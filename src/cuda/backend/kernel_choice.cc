#include "cuda/backend/kernel_choice.h"

#include "core/error.h"

namespace mx::cuda {

namespace {

struct Named {
  const char* name;
  int value;
};

// GemmConfig::kernel values (src/cuda/mxfp4_kernels.h, docs/kernels.md).
constexpr Named kGemmKernels[] = {{"auto", 0},         {"strip", 1},         {"strip-ring", 2},
                                  {"tiled", 3},        {"strip-bulk", 4},    {"strip-batched", 5},
                                  {"strip-batched-tight", 6}, {"wgmma", 7}};
// MoeConfig::path values.
constexpr Named kMoeKernels[] = {{"auto", 0},          {"routed", 1},        {"direct", 2},
                                 {"prefill-tiles", 3}, {"prefill-wgmma", 4}, {"prefill-ws", 5}};

constexpr Named kW4a4Mmas[] = {{"auto", 0}, {"bf16", 1}, {"fp8", 2}, {"fp8-256", 3}};

template <size_t N>
int parse(const Named (&table)[N], const std::string& name, const char* flag) {
  std::string names;
  for (const Named& n : table) {
    if (name == n.name) return n.value;
    names += names.empty() ? n.name : std::string(", ") + n.name;
  }
  fail_input("{} {}: unknown kernel (one of: {})", flag, name, names);
}

}  // namespace

int parse_mxfp4_gemm_kernel(const std::string& name) { return parse(kGemmKernels, name, "--mxfp4-gemm-kernel"); }
int parse_moe_kernel(const std::string& name) { return parse(kMoeKernels, name, "--moe-kernel"); }
int parse_w4a4_mma(const std::string& name) { return parse(kW4a4Mmas, name, "--w4a4-mma"); }

bool RefusedShapes::refused(const Key& key) const {
  std::lock_guard lock(mutex_);
  return keys_.count(key) != 0;
}

bool RefusedShapes::add(const Key& key) {
  std::lock_guard lock(mutex_);
  return keys_.insert(key).second;
}

size_t RefusedShapes::size() const {
  std::lock_guard lock(mutex_);
  return keys_.size();
}

}  // namespace mx::cuda
