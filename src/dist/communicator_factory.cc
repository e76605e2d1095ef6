#include "dist/communicator_factory.h"

#include <map>
#include <mutex>

#include "core/error.h"
#include "dist/local_group.h"

namespace mx {

namespace {
std::mutex g_mu;
std::map<std::string, CommunicatorFactory>& factories() {
  static std::map<std::string, CommunicatorFactory> f;
  return f;
}
}  // namespace

void register_communicator_factory(const std::string& device, CommunicatorFactory factory) {
  std::lock_guard lock(g_mu);
  factories()[device] = factory;
}

std::vector<std::unique_ptr<Communicator>> make_parallel_communicators(const std::string& device, int world_size,
                                                                       int first_device) {
  if (device == "cpu") return LocalGroup::make(world_size);
  CommunicatorFactory factory = nullptr;
  {
    std::lock_guard lock(g_mu);
    auto it = factories().find(device);
    if (it != factories().end()) factory = it->second;
  }
  if (!factory)
    fail_input("tensor parallelism on device '{}': this build has no communicator for it (cpu: in-process; cuda: "
               "NCCL, built with -DMXSERVE_CUDA=ON)", device);
  return factory(world_size, first_device);
}

}  // namespace mx
