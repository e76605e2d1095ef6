#include "ops/backend_registry.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <atomic>
#include <map>
#include <mutex>

#include "core/error.h"

namespace mx {
namespace {

std::unique_ptr<Ops> make_cpu_backend(const BackendOptions& options) {
  if (options.attention_kernel != "auto")
    fail_input("--attention-kernel {} selects a CUDA kernel; the cpu backend has one attention implementation",
               options.attention_kernel);
  if (options.mxfp4_gemm_kernel != "auto" || options.moe_kernel != "auto" || options.w4a4_mma != "auto")
    fail_input("--mxfp4-gemm-kernel {} / --moe-kernel {} / --w4a4-mma {} select CUDA kernels; the cpu backend has one "
               "MXFP4 GEMM and one MoE implementation",
               options.mxfp4_gemm_kernel, options.moe_kernel, options.w4a4_mma);
  return make_cpu_ops(options.activation_mode);
}

struct Registry {
  std::mutex mutex;
  std::map<std::string, OpsFactory> factories{{"cpu", &make_cpu_backend}};
};

Registry& registry() {
  static Registry r;
  return r;
}

}  // namespace

void register_ops_backend(const std::string& name, OpsFactory factory) {
  Registry& r = registry();
  std::lock_guard lock(r.mutex);
  r.factories[name] = factory;
}

std::vector<std::string> available_ops_backends() {
  Registry& r = registry();
  std::lock_guard lock(r.mutex);
  std::vector<std::string> names;
  for (const auto& [name, f] : r.factories) names.push_back(name);
  return names;
}

std::unique_ptr<Ops> make_ops(const std::string& name, const BackendOptions& options) {
  OpsFactory factory = nullptr;
  {
    Registry& r = registry();
    std::lock_guard lock(r.mutex);
    auto it = r.factories.find(name);
    if (it != r.factories.end()) factory = it->second;
  }
  if (!factory) {
    const std::string hint = name == "cuda" ? " (this binary was built without CUDA: configure with -DMXSERVE_CUDA=ON)" : "";
    fail_input("unknown device backend '{}'{}; available: {}", name, hint, fmt::join(available_ops_backends(), ", "));
  }
  return factory(options);
}

namespace {
std::atomic<DeviceMemoryInfoHook> memory_info_hook{nullptr};
}  // namespace

void set_device_memory_info_hook(DeviceMemoryInfoHook hook) { memory_info_hook = hook; }

DeviceMemoryInfo device_memory_info(int device_index) {
  const DeviceMemoryInfoHook hook = memory_info_hook;
  if (!hook) fail_input("device memory information needs a GPU backend (this binary was built without CUDA)");
  return hook(device_index);
}

}  // namespace mx
