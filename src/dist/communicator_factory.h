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

}  // namespace mx
