// The CUDA backend of ops.h. Activations live on the GPU for the whole forward
// pass: every op takes and returns F32 device tensors (device_memory.h; a host
// tensor given as input is uploaded first, a host tensor updated in place is
// copied back) and runs on the backend's own stream without host
// synchronization, except to_host() and the generic fused-MoE path (one small
// copy of the expert ids per MoE layer). Weights arrive as host tensors (the
// mmap'd checkpoint) and are uploaded once, at first use, keyed by their host
// address (the host storage is kept alive so the address cannot be reused):
//   Dense F32/F16 -> F32 (cuBLAS SGEMM, F32 math), Dense BF16 -> BF16 (cuBLAS
//   GEMM, activations rounded to BF16, F32 accumulate and output), MXFP4 ->
//   the kernel layout of src/cuda (mxfp4_gemm; W4A4 quantize-dequantizes x on
//   the GPU bit-exactly as the CPU), FP8 block / INT4 group -> dequantized to
//   BF16 once (2x / 4x their stored size in GPU memory) and the BF16 path.
// Attention ops go to CudaAttention (cuda_attention.h: device KV cache and
// kernels), or with CudaOpsOptions::cpu_attention to the CPU reference over a
// host-resident KV cache (activations copied across for those ops only).
// docs/cuda-backend.md lists where each op runs and the parity thresholds.
#pragma once
#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "cuda/backend/cuda_attention.h"
#include "cuda/backend/kernel_choice.h"
#include "cuda/backend/step_graphs.h"
#include "cuda/mxfp4_kernels.h"
#include "ops/ops.h"

namespace mx::cuda {

struct CudaOpsOptions {
  int device = 0;
  // Fill every fresh device tensor with NaN, so an element a kernel forgets to
  // write shows up (parity tests).
  bool poison_outputs = false;
  // Reference numerics: Dense BF16 linears keep F32 activations (a warp per
  // output, BF16 weights widened), FP8/INT4/MXFP4 weights are dequantized to
  // F32 (SGEMM, the generic fused-MoE path),
  // and attention takes CudaAttention's CUDA-core kernel (F32 math), so
  // results match the CPU backend to F32 rounding. Slow; for parity runs.
  bool f32_activations = false;
  // Attention ops on the CPU reference over a host KV cache instead of
  // CudaAttention (the op's activations are copied across). Isolates the
  // non-attention ops in whole-model parity runs.
  bool cpu_attention = false;
  // Forces one attention kernel family (CLI --attention-kernel); Auto picks
  // by shape (docs/cuda-attention.md).
  AttentionKernel attention_kernel = AttentionKernel::Auto;
  // Forced MXFP4 GemmConfig::kernel / MoeConfig::path (0 = auto), applied
  // where the kernel takes the shape (kernel_choice.h).
  int mxfp4_gemm_kernel = 0;
  int moe_path = 0;
  int w4a4_mma = 0;  // MoeConfig::w4a4_mma (CLI --w4a4-mma)
  // MoeConfig::ws_down_items (path 5's down items; no CLI name: ops_parity
  // runs the wide down with it, refused shapes falling back to auto).
  int moe_ws_down_items = 0;
};

class CudaOps : public Ops {
 public:
  CudaOps(ActivationMode mode, CudaOpsOptions options);
  ~CudaOps() override;
  CudaOps(const CudaOps&) = delete;
  CudaOps& operator=(const CudaOps&) = delete;

  // Which ops run CUDA kernels (all of ops.h; the attention ops not with
  // cpu_attention).
  std::vector<std::string> gpu_ops() const;

  cudaStream_t stream() const { return stream_; }
  // Shapes a forced MXFP4 GEMM kernel / MoE choice refused so far (they ran
  // on the automatic choice; kernel_choice.h).
  size_t refused_forced_gemm_shapes() const { return refused_gemm_.size(); }
  size_t refused_forced_moe_sizes() const { return refused_moe_.size(); }
  // Dense W4A4 linears run on FP8 tensor cores so far (--w4a4-mma fp8).
  size_t fp8_dense_runs() const { return fp8_dense_runs_; }
  // A device copy of a host tensor (a device tensor is returned as is).
  Tensor to_device(const Tensor& t);

  Tensor empty(DType dtype, Shape shape) override;
  Tensor to_host(const Tensor& t) override;
  void begin_step() override;
  void prepare(const std::vector<int32_t>& values) override;
  void prepare(const std::vector<int64_t>& values) override;
  void prepare(const AttentionMeta& meta) override;

  // Step graphs (step_graphs.h).
  bool supports_step_graphs() const override { return !options_.cpu_attention; }
  void* device_stream() override { return stream_; }
  void begin_static_step(uint64_t key) override;
  bool replay_step(Tensor& out) override { return graphs_.replay(out); }
  bool begin_capture(DType out_dtype, Shape out_shape) override;
  Tensor end_capture(Tensor out) override { return graphs_.end_capture(std::move(out)); }
  void abort_capture() override { graphs_.abort_capture(); }
  // CUDA events on this backend's stream (cuda_op_clock.h).
  std::unique_ptr<OpClock> make_clock() override;

  Tensor embedding(const Tensor& table, const std::vector<int32_t>& ids) override;
  Tensor rms_norm(const Tensor& x, const Tensor& weight, float eps) override;
  Tensor add_rms_norm(Tensor& residual, const Tensor& delta, const Tensor& weight, float eps) override;
  void add_inplace(Tensor& x, const Tensor& delta) override;
  void axpy_inplace(Tensor& x, const Tensor& delta, float scale) override;
  void rope_inplace(Tensor& x, const std::vector<int32_t>& positions, const RopeTable& rope, int64_t heads,
                    int64_t head_stride, int64_t offset) override;
  Tensor silu_and_mul(const Tensor& gate, const Tensor& up) override;
  Tensor slice_cols(const Tensor& x, int64_t groups, int64_t begin, int64_t end) override;
  Tensor gather_rows(const Tensor& x, const std::vector<int64_t>& rows) override;
  void scatter_rows(Tensor& dst, const std::vector<int64_t>& rows, const Tensor& src) override;
  Tensor concat_cols(const Tensor& a, const Tensor& b, int64_t groups, bool shared_b) override;

  Tensor linear(const Tensor& x, const LinearWeight& w) override;             // cuda_linear.cc
  Tensor head_matmul(const Tensor& x, const Tensor& w, bool transpose_w) override;

  MoeRouting route_noaux_tc(const Tensor& logits, const Tensor& bias, const RoutingParams& p) override;  // cuda_moe.cc
  MoeRouting route_softmax(const Tensor& logits, const RoutingParams& p) override;
  Tensor fused_moe(const Tensor& x, const std::vector<ExpertWeights>& experts, const MoeRouting& r) override;

  // attention_ops.cc
  KvLayerCache allocate_kv(int64_t num_blocks, int64_t block_size, int64_t heads, int64_t k_dim, int64_t v_dim,
                           bool latent, DType dtype) override;
  void store_kv(KvLayerCache& cache, const Tensor& k, const Tensor& v, const std::vector<int64_t>& slots) override;
  Tensor paged_attention(const Tensor& q, const KvLayerCache& cache, const AttentionMeta& meta, float scale) override;
  Tensor gather_cached_k(const KvLayerCache& cache, const std::vector<int32_t>& block_table,
                         int64_t num_tokens) override;
  Tensor attention(const Tensor& q, const Tensor& k, const Tensor& v, float scale) override;

 private:
  // A weight (or weight-derived table) on the device, with the host storage it
  // came from kept alive so its address stays unique.
  struct CachedWeight {
    std::shared_ptr<Storage> keep_alive;
    Tensor device;
  };
  struct CachedLinear {
    std::shared_ptr<Storage> keep_alive;
    enum class Kind { F32, Bf16, Mxfp4 } kind = Kind::F32;
    Tensor weight;           // F32 / BF16 [N, K], or MXFP4 kernel-layout codes
    Tensor scales;           // MXFP4 kernel-layout scales
    bool big_scales = false;
    Tensor bias;             // F32 [N] or undefined
    // W4A4 with --w4a4-mma fp8: the FP8 dense layout of the codes and each
    // row's largest scale (pack_fp8_dense_device), or undefined.
    Tensor fp8_codes, row_smax;
  };
  // One MoE layer's MXFP4 experts in fused_moe_decode's layout (cuda_moe.cc).
  struct PackedMoe {
    std::vector<std::shared_ptr<Storage>> keep_alive;
    Tensor w13_codes, w13_scales, w2_codes, w2_scales;
    MoeWeights weights;
  };

  Tensor fresh(DType dtype, Shape shape);  // device_empty on the stream, poisoned when asked
  // The device copy of a weight-like host tensor, made once; `as_f32` converts
  // other dtypes to F32 first (BF16/F32 are kept as they are unless forced).
  const Tensor& device_weight(const Tensor& w, const char* op, bool force_f32 = false);
  const CachedLinear& device_linear(const LinearWeight& w);
  // A prepared index vector's device copy (recognized by address and
  // length), else an upload of it (which throws inside a capture).
  const void* step_data(const void* host, size_t count, size_t elem, Tensor& keep, const char* op);
  const int64_t* device_rows(const std::vector<int64_t>& rows, int64_t limit, Tensor& keep, const char* op);
  void prepare_index(const void* host, size_t count, size_t elem);
  template <typename F>
  void update_in_place(Tensor& x, F&& f);
  void check_launch(const char* op);
  Tensor linear_on(const Tensor& x, const CachedLinear& cl, const LinearWeight& w);
  MoeRouting route(const Tensor& logits, const Tensor& bias, const RoutingParams& p, bool sigmoid);
  const PackedMoe* packed_moe(const std::vector<ExpertWeights>& experts);
  // mxfp4_gemm / fused_moe_decode with options_'s forced kernel where it takes
  // the shape, else auto (kernel_choice.h).
  void run_mxfp4_gemm(const Mxfp4DeviceWeight& w, const uint16_t* x, int M, uint16_t* y);
  // The FP8 dense layout of an MXFP4 linear's packed codes (W4A4 with
  // --w4a4-mma fp8), when the kernel takes its shape and every block is
  // within reach of the kernel's fold table.
  void prepare_fp8_dense(CachedLinear& cl, const LinearWeight& w);
  void run_fused_moe(const MoeWeights& w, const uint16_t* x, const int* ids, const float* weights, int T, int topk,
                     float* out, void* workspace);
  Tensor fused_moe_generic(const Tensor& x, const std::vector<ExpertWeights>& experts, const MoeRouting& r);

  // Owners of the stream and the cuBLAS handle, declared first so that they
  // outlive every device tensor of this object (freed stream-ordered on it).
  struct StreamOwner {
    explicit StreamOwner(int device);
    ~StreamOwner();
    cudaStream_t stream = nullptr;
  };
  struct CublasOwner {
    explicit CublasOwner(cudaStream_t stream);
    ~CublasOwner();
    cublasHandle_t handle = nullptr;
  };

  CudaOpsOptions options_;
  ActivationMode mode_;
  StreamOwner stream_owner_;
  cudaStream_t stream_;
  CublasOwner cublas_owner_;
  cublasHandle_t cublas_;
  std::unique_ptr<Ops> cpu_;  // the cpu_attention path
  CudaAttention attention_;
  std::map<std::pair<const uint8_t*, size_t>, CachedWeight> weights_;
  std::map<const uint8_t*, CachedLinear> linears_;
  std::map<const uint8_t*, std::unique_ptr<PackedMoe>> moes_;
  RefusedShapes refused_gemm_, refused_moe_;
  size_t fp8_dense_runs_ = 0;
  std::map<std::vector<float>, Tensor> rope_freqs_;
  Tensor cublas_workspace_;  // fixed, so cuBLAS allocates nothing inside a capture
  // Declared after the stream owner: destroyed (recordings, capture) before it.
  StepGraphs graphs_;
  // prepare(values): the step's index vectors on the device, recognized by the
  // host vector's address and length until the next step begins.
  struct PreparedIndex {
    const void* host;
    size_t count, elem;
    const void* device;
    Tensor keep;
  };
  std::vector<PreparedIndex> prepared_index_;
};

std::unique_ptr<Ops> make_cuda_ops(ActivationMode mode, CudaOpsOptions options = {});

}  // namespace mx::cuda
