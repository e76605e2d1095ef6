// Communicators over NCCL for the GPUs of one process (one rank per GPU,
// ranks as worker threads: model/parallel_causal_lm.h). Built only with
// -DMXSERVE_CUDA=ON; registered for device "cuda" by src/cli/nccl_comm.cc.
#pragma once
#include <memory>
#include <vector>

#include "dist/communicator.h"
#include "dist/communicator_factory.h"

namespace mx::cuda {

// world_size communicators on GPUs first_device .. first_device + world_size - 1
// (ncclCommInitAll). NVLink multicast (NVLS) must stay off on the lent
// machines: NCCL_NVLS_ENABLE=0 is set in the environment before NCCL starts
// when the caller left it unset (logged).
std::vector<std::unique_ptr<Communicator>> make_nccl_communicators(int world_size, int first_device);

// Multi-node (docs/parallel.md): node 0 makes the group's id (ncclGetUniqueId,
// 128 bytes) and sends it to every node over the TCP bootstrap; each node then
// creates its local ranks' communicators with ncclCommInitRank(world, id,
// global rank) inside one ncclGroupStart/End. Registered for device "cuda"
// (dist/communicator_factory.h) when this file is linked.
std::string make_nccl_group_id();
std::vector<std::unique_ptr<Communicator>> make_nccl_communicators_for(const RankPlacement& placement);

}  // namespace mx::cuda
