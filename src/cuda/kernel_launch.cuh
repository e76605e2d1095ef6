// Kernel launches with the sm_90 launch attributes the MXFP4 kernels use:
// programmatic dependent launch (PDL) on the previous kernel of the stream,
// and thread-block clusters. Included by .cu files only.
#pragma once
#include <cuda_runtime.h>

#include <algorithm>

#include "cuda/cuda_check.h"
#include "cuda/device_info.h"
#include "cuda/per_device_once.h"

namespace mx::cuda {

struct LaunchAttrs {
  // The kernel may start while the previous kernel of the stream finishes; it
  // must call griddepcontrol.wait before reading that kernel's outputs or
  // writing anything (dev::griddep_wait; a no-op without this attribute):
  // kernel 11's producer lets dependents start before its consumers are done.
  bool pdl = false;
  dim3 cluster = dim3(1);  // CTAs per thread-block cluster along x, y, z (1 x 1 x 1: none)
};

template <class... KArgs, class... Args>
void launch_with(void (*kernel)(KArgs...), dim3 grid, int threads, size_t smem, cudaStream_t stream,
                 LaunchAttrs a, Args... args) {
  cudaLaunchConfig_t cfg = {};
  cfg.gridDim = grid;
  cfg.blockDim = dim3(unsigned(threads));
  cfg.dynamicSmemBytes = smem;
  cfg.stream = stream;
  cudaLaunchAttribute attr[2];
  unsigned n = 0;
  if (a.pdl) {
    attr[n].id = cudaLaunchAttributeProgrammaticStreamSerialization;
    attr[n++].val.programmaticStreamSerializationAllowed = 1;
  }
  if (a.cluster.x * a.cluster.y * a.cluster.z > 1) {
    attr[n].id = cudaLaunchAttributeClusterDimension;
    attr[n].val.clusterDim.x = a.cluster.x;
    attr[n].val.clusterDim.y = a.cluster.y;
    attr[n++].val.clusterDim.z = a.cluster.z;
  }
  cfg.attrs = attr;
  cfg.numAttrs = n;
  MX_CUDA_CHECK(cudaLaunchKernelEx(&cfg, kernel, KArgs(args)...));
}

// CTAs to launch of a persistent `Kernel` (threads per CTA, dynamic shared
// memory smem) in clusters of `cluster` CTAs for about `ctas` CTAs: whole
// clusters only, at least one, and no more than fit on the device at once (a
// cluster's CTAs share a GPC, whose SM count need not be a multiple of the
// cluster size). Queried once per device; one cluster size per Kernel.
template <auto Kernel>
int cluster_grid(int cluster, int threads, size_t smem, int ctas) {
  static PerDeviceOnce query;
  static int fitting[64];
  int device = 0;
  MX_CUDA_CHECK(cudaGetDevice(&device));
  query([&] {
    cudaLaunchConfig_t cfg = {};
    cfg.gridDim = dim3(unsigned(cluster * sm_count()));
    cfg.blockDim = dim3(unsigned(threads));
    cfg.dynamicSmemBytes = smem;
    cudaLaunchAttribute attr;
    attr.id = cudaLaunchAttributeClusterDimension;
    attr.val.clusterDim.x = unsigned(cluster), attr.val.clusterDim.y = 1, attr.val.clusterDim.z = 1;
    cfg.attrs = &attr;
    cfg.numAttrs = 1;
    MX_CUDA_CHECK(cudaOccupancyMaxActiveClusters(&fitting[device & 63], Kernel, &cfg));
  });
  return cluster * std::max(1, std::min(ctas / cluster, fitting[device & 63]));
}

}  // namespace mx::cuda
