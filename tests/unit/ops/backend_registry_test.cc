#include "ops/backend_registry.h"

#include <gtest/gtest.h>

#include "core/error.h"

namespace mx {
namespace {

TEST(BackendRegistry, CpuIsAlwaysAvailable) {
  auto ops = make_ops("cpu", {});
  ASSERT_NE(ops, nullptr);
  Tensor t = ops->empty(DType::F32, {2, 3});
  EXPECT_EQ(t.device(), Device::CPU);
  EXPECT_EQ(ops->to_host(t).raw(), t.raw());  // CPU: no copy
}

TEST(BackendRegistry, UnknownBackendNamesTheAvailableOnes) {
  try {
    make_ops("tpu", {});
    FAIL() << "expected an error";
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("unknown device backend 'tpu'"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("cpu"), std::string::npos) << e.what();
  }
}

TEST(BackendRegistry, RegisteredFactoryIsUsed) {
  static int calls = 0;
  register_ops_backend("test-backend", [](const BackendOptions& o) {
    ++calls;
    return make_cpu_ops(o.activation_mode);
  });
  auto ops = make_ops("test-backend", {});
  EXPECT_EQ(calls, 1);
  EXPECT_NE(ops, nullptr);
}

}  // namespace
}  // namespace mx

namespace mx {
namespace {

TEST(BackendRegistry, CpuRefusesACudaAttentionKernelChoice) {
  BackendOptions o;
  o.attention_kernel = "tensor-core";
  EXPECT_THROW(make_ops("cpu", o), InvalidArgument);
  o.attention_kernel = "auto";
  o.exact_numerics = true;  // the CPU backend is the exact reference already
  EXPECT_NE(make_ops("cpu", o), nullptr);
}

TEST(BackendRegistry, CpuRefusesForcedMxfp4Kernels) {
  BackendOptions o;
  o.mxfp4_gemm_kernel = "tiled";
  EXPECT_THROW(make_ops("cpu", o), InvalidArgument);
  o.mxfp4_gemm_kernel = "auto";
  o.moe_kernel = "prefill-tiles";
  EXPECT_THROW(make_ops("cpu", o), InvalidArgument);
  o.moe_kernel = "auto";
  o.w4a4_mma = "fp8";
  EXPECT_THROW(make_ops("cpu", o), InvalidArgument);
  o.w4a4_mma = "auto";
  EXPECT_NE(make_ops("cpu", o), nullptr);
}

}  // namespace
}  // namespace mx
