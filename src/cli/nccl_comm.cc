// Registers the NCCL communicators for `--device cuda -tp N` when the binary
// is built with CUDA (-DMXSERVE_CUDA=ON); a CPU-only build has none and says so.
#ifdef MXSERVE_HAVE_CUDA
#include "cuda/dist/nccl_communicator.h"
#include "dist/communicator_factory.h"

namespace {

const bool registered = [] {
  mx::register_communicator_factory("cuda", &mx::cuda::make_nccl_communicators);
  return true;
}();

}  // namespace
#endif
