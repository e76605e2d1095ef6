// Communicators for the ranks of one process, by Ops backend: "cpu" gets the
// in-process group (local_group.h); a device backend's communicator (NCCL for
// "cuda", src/cuda/dist/) registers itself when the binary is built with it,
// so this layer never depends on CUDA.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "dist/communicator.h"

namespace mx {

// world_size communicators, rank r on device first_device + r.
using CommunicatorFactory = std::vector<std::unique_ptr<Communicator>> (*)(int world_size, int first_device);

void register_communicator_factory(const std::string& device, CommunicatorFactory factory);
// Throws InvalidArgument when `device` has no communicator in this build.
std::vector<std::unique_ptr<Communicator>> make_parallel_communicators(const std::string& device, int world_size,
                                                                       int first_device);

// A group spread over processes (nodes, docs/parallel.md): this process holds
// global ranks first_rank .. first_rank + local_ranks - 1 of world_size, on
// devices first_device + i. group_id: the bytes node 0 made with
// make_group_id() and sent to every node (NCCL's unique id).
struct RankPlacement {
  int world_size = 1, first_rank = 0, local_ranks = 1, first_device = 0;
  std::string group_id;
};
using MultiNodeCommunicatorFactory = std::vector<std::unique_ptr<Communicator>> (*)(const RankPlacement& placement);
using GroupIdFactory = std::string (*)();
void register_multinode_communicator_factory(const std::string& device, MultiNodeCommunicatorFactory factory,
                                             GroupIdFactory make_id);
// Node 0: the id of a new group on `device` ("" when its communicators need
// none: "cpu" ranks use the tcp communicator node_group.h builds).
std::string make_group_id(const std::string& device);
// Throws InvalidArgument when `device` has no multi-node communicator in this build.
std::vector<std::unique_ptr<Communicator>> make_multinode_communicators(const std::string& device,
                                                                        const RankPlacement& placement);

}  // namespace mx
