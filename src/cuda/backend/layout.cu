// Data-movement kernels of the CUDA backend: column slices, row gathers and
// scatters, per-group concatenation, and the MoE combine of one expert. Pure
// copies (bit-exact to src/ops/cpu_ops.cc) except the combine, which is the
// CPU's `out += w * y` in the same expert order.
#include "cuda/backend/kernels.h"

namespace mx::cuda {
namespace {

constexpr int kThreads = 256;

unsigned grid_for(int64_t n) { return unsigned((n + kThreads - 1) / kThreads < 65535 ? (n + kThreads - 1) / kThreads : 65535); }

__global__ void slice_cols_kernel(const float* x, int64_t rows, int64_t groups, int64_t group_width, int64_t begin,
                                  int64_t width, float* out) {
  const int64_t n = rows * groups * width;
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x) {
    const int64_t c = i % width, rg = i / width;  // rg = r * groups + g
    out[i] = x[rg * group_width + begin + c];
  }
}

__global__ void gather_rows_kernel(const float* x, const int64_t* rows, int64_t n, int64_t d, float* out) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n * d; i += int64_t(gridDim.x) * blockDim.x)
    out[i] = x[rows[i / d] * d + i % d];
}

__global__ void scatter_rows_kernel(float* dst, const int64_t* rows, int64_t n, int64_t d, const float* src) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n * d; i += int64_t(gridDim.x) * blockDim.x)
    dst[rows[i / d] * d + i % d] = src[i];
}

__global__ void concat_cols_kernel(const float* a, const float* b, int64_t rows, int64_t groups, int64_t da,
                                   int64_t db, bool shared_b, float* out) {
  const int64_t w = da + db, n = rows * groups * w;
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x) {
    const int64_t c = i % w, g = (i / w) % groups, t = i / (w * groups);
    out[i] = c < da ? a[(t * groups + g) * da + c]
                    : b[t * (shared_b ? db : groups * db) + (shared_b ? 0 : g * db) + (c - da)];
  }
}

__global__ void moe_scatter_add_kernel(const float* y, const int32_t* pairs, const float* weights, int64_t top_k,
                                       int64_t n, int64_t d, float* out) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n * d; i += int64_t(gridDim.x) * blockDim.x) {
    const int32_t pair = pairs[i / d];
    out[(pair / top_k) * d + i % d] += weights[pair] * y[i];
  }
}

}  // namespace

void launch_slice_cols(const float* x, int64_t rows, int64_t groups, int64_t group_width, int64_t begin,
                       int64_t width, float* out, cudaStream_t stream) {
  const int64_t n = rows * groups * width;
  if (n) slice_cols_kernel<<<grid_for(n), kThreads, 0, stream>>>(x, rows, groups, group_width, begin, width, out);
}

void launch_gather_rows(const float* x, const int64_t* rows, int64_t n, int64_t d, float* out, cudaStream_t stream) {
  if (n * d > 0) gather_rows_kernel<<<grid_for(n * d), kThreads, 0, stream>>>(x, rows, n, d, out);
}

void launch_scatter_rows(float* dst, const int64_t* rows, int64_t n, int64_t d, const float* src,
                         cudaStream_t stream) {
  if (n * d > 0) scatter_rows_kernel<<<grid_for(n * d), kThreads, 0, stream>>>(dst, rows, n, d, src);
}

void launch_concat_cols(const float* a, const float* b, int64_t rows, int64_t groups, int64_t da, int64_t db,
                        bool shared_b, float* out, cudaStream_t stream) {
  const int64_t n = rows * groups * (da + db);
  if (n) concat_cols_kernel<<<grid_for(n), kThreads, 0, stream>>>(a, b, rows, groups, da, db, shared_b, out);
}

void launch_moe_scatter_add(const float* y, const int32_t* pairs, const float* weights, int64_t top_k, int64_t n,
                            int64_t d, float* out, cudaStream_t stream) {
  if (n * d > 0) moe_scatter_add_kernel<<<grid_for(n * d), kThreads, 0, stream>>>(y, pairs, weights, top_k, n, d, out);
}

}  // namespace mx::cuda
