// The CUDA backend of ops.h (first slice, issue 7). Tensors stay host-resident
// (core/tensor.h has no device storage yet): each GPU op uploads its
// activations, runs on the backend's stream and downloads the result. Weights
// (embedding tables, norm weights, dense linear weights) are uploaded once and
// cached by their host storage. Ops without a CUDA kernel yet are forwarded to
// the CPU reference backend, so CudaOps is a complete Ops; gpu_ops() lists the
// ones that run on the GPU (docs/cuda-backend.md).
#pragma once
#include <cuda_runtime_api.h>

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "ops/ops.h"

namespace mx::cuda {

struct CudaOpsOptions {
  int device = 0;
  // Fill every device output buffer with NaN before its kernel runs, so an
  // element a kernel forgets to write shows up (parity tests).
  bool poison_outputs = false;
};

// A cudaMalloc'ed buffer, freed on destruction.
class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  DeviceBuffer(size_t bytes, const char* op);
  ~DeviceBuffer();
  DeviceBuffer(DeviceBuffer&& o) noexcept : ptr_(o.ptr_), bytes_(o.bytes_) { o.ptr_ = nullptr, o.bytes_ = 0; }
  DeviceBuffer& operator=(DeviceBuffer&& o) noexcept;
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  template <typename T = void>
  T* get() const { return static_cast<T*>(ptr_); }
  size_t bytes() const { return bytes_; }

 private:
  void* ptr_ = nullptr;
  size_t bytes_ = 0;
};

class CudaOps : public Ops {
 public:
  CudaOps(ActivationMode mode, CudaOpsOptions options);
  // linear on MXFP4 weights runs mxfp4_gemm (src/cuda/mxfp4_kernels.h), which
  // takes BF16 activations: x is rounded to BF16 on the GPU and y comes back
  // through BF16 (W4A16 as that kernel defines it). W4A4 inputs, shapes the
  // kernel layout refuses (N % 16, K % 64) go to the CPU reference.
  ~CudaOps() override;

  // The ops that run CUDA kernels (the rest run on the CPU reference).
  static std::vector<std::string> gpu_ops();

  Tensor embedding(const Tensor& table, const std::vector<int32_t>& ids) override;
  Tensor rms_norm(const Tensor& x, const Tensor& weight, float eps) override;
  Tensor add_rms_norm(Tensor& residual, const Tensor& delta, const Tensor& weight, float eps) override;
  void rope_inplace(Tensor& x, const std::vector<int32_t>& positions, const RopeTable& rope, int64_t heads,
                    int64_t head_stride, int64_t offset) override;
  Tensor silu_and_mul(const Tensor& gate, const Tensor& up) override;
  Tensor linear(const Tensor& x, const LinearWeight& w) override;

  // Tensors are still host-resident in this slice.
  Tensor empty(DType dtype, Shape shape) override { return Tensor::empty(dtype, std::move(shape)); }
  Tensor to_host(const Tensor& t) override { return t; }

  // ---- forwarded to the CPU reference (no CUDA kernel yet) ----
  void add_inplace(Tensor& x, const Tensor& delta) override { cpu_->add_inplace(x, delta); }
  void axpy_inplace(Tensor& x, const Tensor& delta, float scale) override { cpu_->axpy_inplace(x, delta, scale); }
  Tensor slice_cols(const Tensor& x, int64_t groups, int64_t begin, int64_t end) override {
    return cpu_->slice_cols(x, groups, begin, end);
  }
  Tensor gather_rows(const Tensor& x, const std::vector<int64_t>& rows) override { return cpu_->gather_rows(x, rows); }
  void scatter_rows(Tensor& dst, const std::vector<int64_t>& rows, const Tensor& src) override {
    cpu_->scatter_rows(dst, rows, src);
  }
  Tensor concat_cols(const Tensor& a, const Tensor& b, int64_t groups, bool shared_b) override {
    return cpu_->concat_cols(a, b, groups, shared_b);
  }
  Tensor head_matmul(const Tensor& x, const Tensor& w, bool transpose_w) override {
    return cpu_->head_matmul(x, w, transpose_w);
  }
  MoeRouting route_noaux_tc(const Tensor& logits, const Tensor& bias, const RoutingParams& p) override {
    return cpu_->route_noaux_tc(logits, bias, p);
  }
  MoeRouting route_softmax(const Tensor& logits, const RoutingParams& p) override {
    return cpu_->route_softmax(logits, p);
  }
  Tensor fused_moe(const Tensor& x, const std::vector<ExpertWeights>& experts, const MoeRouting& r) override {
    return cpu_->fused_moe(x, experts, r);
  }
  KvLayerCache allocate_kv(int64_t num_blocks, int64_t block_size, int64_t heads, int64_t k_dim, int64_t v_dim,
                           bool latent, DType dtype) override {
    return cpu_->allocate_kv(num_blocks, block_size, heads, k_dim, v_dim, latent, dtype);
  }
  void store_kv(KvLayerCache& cache, const Tensor& k, const Tensor& v, const std::vector<int64_t>& slots) override {
    cpu_->store_kv(cache, k, v, slots);
  }
  Tensor paged_attention(const Tensor& q, const KvLayerCache& cache, const AttentionMeta& meta, float scale) override {
    return cpu_->paged_attention(q, cache, meta, scale);
  }
  Tensor gather_cached_k(const KvLayerCache& cache, const std::vector<int32_t>& block_table,
                         int64_t num_tokens) override {
    return cpu_->gather_cached_k(cache, block_table, num_tokens);
  }
  Tensor attention(const Tensor& q, const Tensor& k, const Tensor& v, float scale) override {
    return cpu_->attention(q, k, v, scale);
  }

 private:
  struct CachedWeight {
    std::shared_ptr<Storage> keep_alive;  // the host bytes cannot be freed and their address reused
    DeviceBuffer buffer;
  };

  struct PackedWeight {
    std::shared_ptr<Storage> keep_alive;
    DeviceBuffer codes, scales;
    bool big_scales = false;
  };

  Tensor linear_mxfp4(const Tensor& x, const LinearWeight& w);
  DeviceBuffer upload(const void* host, size_t bytes, const char* op);
  DeviceBuffer output(size_t bytes, const char* op);
  const void* device_weight(const Tensor& w, const char* op);
  Tensor download(const DeviceBuffer& d, Shape shape, const char* op);
  void finish(const char* op);  // checks the launch, waits for the stream

  CudaOpsOptions options_;
  cudaStream_t stream_ = nullptr;
  ActivationMode mode_;
  std::unique_ptr<Ops> cpu_;
  std::map<std::pair<const uint8_t*, size_t>, CachedWeight> weights_;
  std::map<const uint8_t*, PackedWeight> mxfp4_weights_;  // kernel layout (host/mxfp4_layout.h)
};

std::unique_ptr<Ops> make_cuda_ops(ActivationMode mode, CudaOpsOptions options = {});

}  // namespace mx::cuda
