#include "ops/kernel_names.h"

#include "core/error.h"

namespace mx {

namespace {

int parse(const std::vector<std::string>& names, const std::string& name, const char* flag) {
  for (size_t i = 0; i < names.size(); ++i)
    if (names[i] == name) return int(i);
  fail_input("{} {}: unknown kernel (one of: {})", flag, name, join_names(names));
}

}  // namespace

// GemmConfig::kernel 0..12 (docs/kernels.md).
const std::vector<std::string>& mxfp4_gemm_kernel_names() {
  static const std::vector<std::string> names = {"auto",       "strip",         "strip-ring",          "tiled",
                                                 "strip-bulk", "strip-batched", "strip-batched-tight", "wgmma",
                                                 "strip-balanced", "strip-pair", "strip-streamk", "wgmma-ring",
                                                 "strip-pipelined"};
  return names;
}

// MoeConfig::path 0..5.
const std::vector<std::string>& moe_kernel_names() {
  static const std::vector<std::string> names = {"auto",          "routed",        "direct",
                                                 "prefill-tiles", "prefill-wgmma", "prefill-ws"};
  return names;
}

// MoeConfig::w4a4_mma 0..3.
const std::vector<std::string>& w4a4_mma_names() {
  static const std::vector<std::string> names = {"auto", "bf16", "fp8", "fp8-256"};
  return names;
}

int parse_mxfp4_gemm_kernel(const std::string& name) {
  return parse(mxfp4_gemm_kernel_names(), name, "--mxfp4-gemm-kernel");
}
int parse_moe_kernel(const std::string& name) { return parse(moe_kernel_names(), name, "--moe-kernel"); }
int parse_w4a4_mma(const std::string& name) { return parse(w4a4_mma_names(), name, "--w4a4-mma"); }

std::string join_names(const std::vector<std::string>& names) {
  std::string out;
  for (const std::string& n : names) out += (out.empty() ? "" : ", ") + n;
  return out;
}

}  // namespace mx
