// CUDA runtime error checks that throw mx::Error naming the call and place.
#pragma once
#include <cuda_runtime_api.h>

#include "core/error.h"

#define MX_CUDA_CHECK(call)                                                             \
  do {                                                                                  \
    cudaError_t mx_err_ = (call);                                                       \
    if (mx_err_ != cudaSuccess)                                                         \
      ::mx::fail("{}:{}: {} failed: {}", __FILE__, __LINE__, #call,                     \
                 cudaGetErrorString(mx_err_));                                          \
  } while (0)
