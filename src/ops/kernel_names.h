// The names of the CUDA kernel choices the CLI can force (--mxfp4-gemm-kernel,
// --moe-kernel, --w4a4-mma) and the numbers the CUDA kernels take for them
// (GemmConfig::kernel, MoeConfig::path, MoeConfig::w4a4_mma in
// src/cuda/mxfp4_kernels.h). One table per flag serves the CLI's validation and
// help text and the CUDA backend's parsing; plain C++ so CI tests it.
#pragma once
#include <string>
#include <vector>

namespace mx {

// Valid names in the order of their numbers: names[i] means i ("auto" = 0).
const std::vector<std::string>& mxfp4_gemm_kernel_names();
const std::vector<std::string>& moe_kernel_names();
const std::vector<std::string>& w4a4_mma_names();

// The number of a name; unknown names throw InvalidArgument listing the valid ones.
int parse_mxfp4_gemm_kernel(const std::string& name);
int parse_moe_kernel(const std::string& name);
int parse_w4a4_mma(const std::string& name);

// "a, b, c": the names for help texts and messages.
std::string join_names(const std::vector<std::string>& names);

}  // namespace mx
