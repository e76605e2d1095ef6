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
struct MultiNodeEntry {
  MultiNodeCommunicatorFactory make = nullptr;
  GroupIdFactory make_id = nullptr;
};
std::map<std::string, MultiNodeEntry>& multinode_factories() {
  static std::map<std::string, MultiNodeEntry> f;
  return f;
}
MultiNodeEntry multinode_entry(const std::string& device) {
  std::lock_guard lock(g_mu);
  auto it = multinode_factories().find(device);
  if (it == multinode_factories().end())
    fail_input("multi-node tensor parallelism on device '{}': this build has no communicator for it (cpu: tcp; "
               "cuda: NCCL, built with -DMXSERVE_CUDA=ON)", device);
  return it->second;
}
}  // namespace

void register_multinode_communicator_factory(const std::string& device, MultiNodeCommunicatorFactory factory,
                                             GroupIdFactory make_id) {
  std::lock_guard lock(g_mu);
  multinode_factories()[device] = MultiNodeEntry{factory, make_id};
}

std::string make_group_id(const std::string& device) {
  if (device == "cpu") return {};
  return multinode_entry(device).make_id();
}

std::vector<std::unique_ptr<Communicator>> make_multinode_communicators(const std::string& device,
                                                                        const RankPlacement& placement) {
  if (device == "cpu") fail("cpu ranks across nodes use the tcp communicator of their node group");
  return multinode_entry(device).make(placement);
}

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
