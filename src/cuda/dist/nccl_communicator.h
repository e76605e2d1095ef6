// Communicators over NCCL for the GPUs of one process (one rank per GPU,
// ranks as worker threads: model/parallel_causal_lm.h). Built only with
// -DMXSERVE_CUDA=ON; registered for device "cuda" by src/cli/nccl_comm.cc.
#pragma once
#include <memory>
#include <vector>

#include "dist/communicator.h"

namespace mx::cuda {

// world_size communicators on GPUs first_device .. first_device + world_size - 1
// (ncclCommInitAll). NVLink multicast (NVLS) must stay off on the lent
// machines: NCCL_NVLS_ENABLE=0 is set in the environment before NCCL starts
// when the caller left it unset (logged).
std::vector<std::unique_ptr<Communicator>> make_nccl_communicators(int world_size, int first_device);

}  // namespace mx::cuda
