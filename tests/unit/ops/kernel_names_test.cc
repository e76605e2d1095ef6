// The CLI's kernel-choice names and the numbers the CUDA kernels take for them
// (GemmConfig::kernel, MoeConfig::path, MoeConfig::w4a4_mma): one table each.
#include "ops/kernel_names.h"

#include <gtest/gtest.h>

#include <set>

#include "core/error.h"

namespace mx {
namespace {

using Parse = int (*)(const std::string&);

void expect_table(const std::vector<std::string>& names, Parse parse) {
  ASSERT_FALSE(names.empty());
  EXPECT_EQ(names.front(), "auto");
  std::set<std::string> seen;
  for (size_t i = 0; i < names.size(); ++i) {
    EXPECT_TRUE(seen.insert(names[i]).second) << names[i] << " listed twice";
    EXPECT_EQ(parse(names[i]), int(i)) << names[i];
  }
}

TEST(KernelNames, EveryNameParsesToItsPosition) {
  expect_table(mxfp4_gemm_kernel_names(), parse_mxfp4_gemm_kernel);
  expect_table(moe_kernel_names(), parse_moe_kernel);
  expect_table(w4a4_mma_names(), parse_w4a4_mma);
}

TEST(KernelNames, NumbersTheKernelsDocumentStayPut) {
  // The CUDA side switches on these numbers (src/cuda/mxfp4_kernels.h:
  // GemmConfig::kernel, MoeConfig::path, MoeConfig::w4a4_mma).
  EXPECT_EQ(mxfp4_gemm_kernel_names(), (std::vector<std::string>{"auto", "strip", "strip-ring", "tiled", "strip-bulk",
                                                                 "strip-batched", "strip-batched-tight", "wgmma",
                                                                 "strip-balanced", "strip-pair", "strip-streamk",
                                                                 "wgmma-ring", "strip-pipelined"}));
  EXPECT_EQ(moe_kernel_names(), (std::vector<std::string>{"auto", "routed", "direct", "prefill-tiles", "prefill-wgmma",
                                                          "prefill-ws"}));
  EXPECT_EQ(w4a4_mma_names(), (std::vector<std::string>{"auto", "bf16", "fp8", "fp8-256"}));
}

TEST(KernelNames, UnknownNameIsRefusedWithTheChoices) {
  try {
    parse_moe_kernel("fastest");
    FAIL() << "no exception";
  } catch (const InvalidArgument& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("--moe-kernel fastest"), std::string::npos) << what;
    EXPECT_NE(what.find(join_names(moe_kernel_names())), std::string::npos) << what;
  }
  EXPECT_THROW(parse_mxfp4_gemm_kernel(""), InvalidArgument);
  EXPECT_THROW(parse_w4a4_mma("FP8"), InvalidArgument);
  EXPECT_EQ(join_names({"a", "b", "c"}), "a, b, c");
}

}  // namespace
}  // namespace mx
