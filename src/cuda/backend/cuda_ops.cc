// CudaOps: device memory, step metadata, and the elementwise / norm / rope /
// layout ops (see cuda_ops.h). Linear and head_matmul: cuda_linear.cc; MoE:
// cuda_moe.cc; attention: attention_ops.cc.
#include "cuda/backend/cuda_ops.h"

#include <algorithm>

#include "core/error.h"
#include "cuda/backend/cuda_op_clock.h"
#include "cuda/backend/device_memory.h"
#include "cuda/backend/kernels.h"

namespace mx::cuda {
namespace {

int64_t activation_rows(const Tensor& x, const char* op) {
  if (!x.defined() || x.dtype() != DType::F32 || x.ndim() < 1)
    fail_input("{}: expected an F32 activation, got {}", op, x.defined() ? x.describe() : "undefined");
  return x.dim(0);
}

int64_t row_width(const Tensor& x) { return x.dim(0) ? x.numel() / x.dim(0) : 0; }

bool is_bf16_or_f32(const Tensor& w) { return w.dtype() == DType::BF16 || w.dtype() == DType::F32; }

float* f32(const Tensor& t) { return reinterpret_cast<float*>(t.raw()); }

// cuBLAS's recommended workspace on Hopper (its GEMMs must not allocate while
// a step graph is captured).
constexpr int64_t kCublasWorkspaceBytes = int64_t(32) << 20;

}  // namespace

CudaOps::StreamOwner::StreamOwner(int device) {
  check_cuda(cudaSetDevice(device), "init", "cudaSetDevice");
  configure_memory_pool(device);
  check_cuda(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), "init", "cudaStreamCreate");
}

CudaOps::StreamOwner::~StreamOwner() {
  if (!stream) return;
  cudaStreamSynchronize(stream);
  cudaStreamDestroy(stream);
}

CudaOps::CublasOwner::CublasOwner(cudaStream_t stream) {
  if (cublasCreate(&handle) != CUBLAS_STATUS_SUCCESS) fail("CUDA backend: cublasCreate failed");
  // F32 GEMMs stay F32 (no TF32), so the F32 paths match the CPU reference.
  if (cublasSetMathMode(handle, CUBLAS_DEFAULT_MATH) != CUBLAS_STATUS_SUCCESS ||
      cublasSetStream(handle, stream) != CUBLAS_STATUS_SUCCESS)
    fail("CUDA backend: cublas setup failed");
}

CudaOps::CublasOwner::~CublasOwner() {
  if (handle) cublasDestroy(handle);
}

CudaOps::CudaOps(ActivationMode mode, CudaOpsOptions options)
    : options_(options),
      mode_(mode),
      stream_owner_(options.device),
      stream_(stream_owner_.stream),
      cublas_owner_(stream_),
      cublas_(cublas_owner_.handle),
      cpu_(make_cpu_ops(mode)),
      attention_(stream_, options.poison_outputs),
      graphs_(stream_) {
  cublas_workspace_ = device_persistent(DType::U8, {kCublasWorkspaceBytes}, "cuBLAS workspace");
  if (cublasSetWorkspace(cublas_, cublas_workspace_.raw(), size_t(kCublasWorkspaceBytes)) != CUBLAS_STATUS_SUCCESS)
    fail("CUDA backend: cublasSetWorkspace failed");
  attention_.set_step_graphs(&graphs_);
  // The reference numerics take the CUDA-core attention (F32 math) rather
  // than the BF16 tensor-core kernel.
  attention_.set_kernel(options_.attention_kernel);
  if (options_.f32_activations) attention_.set_kernel(AttentionKernel::Generic);
}

CudaOps::~CudaOps() { cudaStreamSynchronize(stream_); }

std::vector<std::string> CudaOps::gpu_ops() const {
  std::vector<std::string> ops = {"embedding", "rms_norm", "add_rms_norm", "add_inplace", "axpy_inplace",
                                  "rope_inplace", "silu_and_mul", "slice_cols", "gather_rows", "scatter_rows",
                                  "concat_cols", "linear", "head_matmul", "route_noaux_tc", "route_softmax",
                                  "fused_moe"};
  if (!options_.cpu_attention)
    for (const char* op : {"allocate_kv", "store_kv", "paged_attention", "gather_cached_k", "attention"})
      ops.push_back(op);
  return ops;
}

void CudaOps::check_launch(const char* op) { check_cuda(cudaGetLastError(), op, "kernel launch"); }

Tensor CudaOps::fresh(DType dtype, Shape shape) {
  return device_empty(dtype, std::move(shape), stream_, options_.poison_outputs);
}

Tensor CudaOps::empty(DType dtype, Shape shape) { return fresh(dtype, std::move(shape)); }

Tensor CudaOps::to_host(const Tensor& t) { return copy_to_host(t, stream_); }

std::unique_ptr<OpClock> CudaOps::make_clock() { return std::make_unique<CudaEventClock>(options_.device, stream_); }

Tensor CudaOps::to_device(const Tensor& t) { return on_device(t) ? t : copy_to_device(t, stream_); }

void CudaOps::begin_step() {
  prepared_index_.clear();
  attention_.begin_step();
  graphs_.begin_step();
}

void CudaOps::begin_static_step(uint64_t key) {
  prepared_index_.clear();
  attention_.begin_step();
  graphs_.begin_static_step(key);
}

bool CudaOps::begin_capture(DType out_dtype, Shape out_shape) {
  return graphs_.begin_capture(out_dtype, std::move(out_shape));
}

void CudaOps::prepare_index(const void* host, size_t count, size_t elem) {
  PreparedIndex p{host, count, elem, nullptr, Tensor()};
  p.device = graphs_.upload(host, count * elem, p.keep, "prepare");
  prepared_index_.push_back(std::move(p));
}

void CudaOps::prepare(const std::vector<int32_t>& values) { prepare_index(values.data(), values.size(), 4); }
void CudaOps::prepare(const std::vector<int64_t>& values) { prepare_index(values.data(), values.size(), 8); }

const void* CudaOps::step_data(const void* host, size_t count, size_t elem, Tensor& keep, const char* op) {
  for (const PreparedIndex& p : prepared_index_)
    if (p.host == host && p.count == count && p.elem == elem && count) return p.device;
  return graphs_.upload(host, count * elem, keep, op);
}

const int64_t* CudaOps::device_rows(const std::vector<int64_t>& rows, int64_t limit, Tensor& keep, const char* op) {
  for (int64_t r : rows)
    if (r < 0 || r >= limit) fail_input("{}: row {} outside [0, {})", op, r, limit);
  return static_cast<const int64_t*>(step_data(rows.data(), rows.size(), 8, keep, op));
}

void CudaOps::prepare(const AttentionMeta& meta) {
  if (!options_.cpu_attention) attention_.prepare(meta);
}

const Tensor& CudaOps::device_weight(const Tensor& w, const char* op, bool force_f32) {
  MX_CHECK(w.defined(), "{}: weight is undefined", op);
  if (on_device(w)) return w;
  auto key = std::make_pair(static_cast<const uint8_t*>(w.raw()), w.nbytes() + (force_f32 ? 1 : 0));
  auto it = weights_.find(key);
  if (it == weights_.end()) {
    const bool keep = is_bf16_or_f32(w) && !(force_f32 && w.dtype() != DType::F32);
    Tensor host = keep ? w : w.to(DType::F32);
    CachedWeight c{w.storage(), copy_to_device(host, stream_)};
    // The converted host copy must outlive the asynchronous upload.
    check_cuda(cudaStreamSynchronize(stream_), op, "weight upload");
    it = weights_.emplace(key, std::move(c)).first;
  }
  return it->second.device;
}

// In-place ops on a host tensor (tests, or callers that did not allocate with
// empty()): run on a device copy, then copy the result back.
template <typename F>
void CudaOps::update_in_place(Tensor& x, F&& f) {
  if (on_device(x)) {
    f(x);
    return;
  }
  Tensor d = copy_to_device(x, stream_);
  f(d);
  Tensor h = copy_to_host(d, stream_);
  std::copy(h.raw(), h.raw() + h.nbytes(), x.raw());
}

Tensor CudaOps::embedding(const Tensor& table, const std::vector<int32_t>& ids) {
  MX_CHECK(table.ndim() == 2, "embedding: table {} is not [vocab, hidden]", table.describe());
  const int64_t vocab = table.dim(0), d = table.dim(1), tokens = int64_t(ids.size());
  for (int32_t id : ids)
    if (id < 0 || id >= vocab) fail_input("token id {} is outside the vocabulary [0, {})", id, vocab);
  const Tensor& t = device_weight(table, "embedding");
  Tensor keep;
  const auto* dids = static_cast<const int32_t*>(step_data(ids.data(), ids.size(), 4, keep, "embedding"));
  Tensor out = fresh(DType::F32, {tokens, d});
  launch_embedding(t.raw(), t.dtype() == DType::BF16, dids, tokens, d, f32(out), stream_);
  check_launch("embedding");
  return out;
}

Tensor CudaOps::rms_norm(const Tensor& x_in, const Tensor& weight, float eps) {
  const int64_t rows = activation_rows(x_in, "rms_norm"), d = row_width(x_in);
  MX_CHECK(weight.numel() == d, "rms_norm weight {} for rows of {}", weight.describe(), d);
  Tensor x = to_device(x_in);
  const Tensor& w = device_weight(weight, "rms_norm");
  Tensor out = fresh(DType::F32, x.shape());
  // delta == null: x is only read.
  launch_rms_norm(f32(x), nullptr, w.raw(), w.dtype() == DType::BF16, rows, d, eps, f32(out), stream_);
  check_launch("rms_norm");
  return out;
}

Tensor CudaOps::add_rms_norm(Tensor& residual, const Tensor& delta_in, const Tensor& weight, float eps) {
  const int64_t rows = activation_rows(residual, "add_rms_norm"), d = row_width(residual);
  activation_rows(delta_in, "add_rms_norm");
  MX_CHECK(residual.numel() == delta_in.numel(), "add_rms_norm: {} and {}", residual.describe(), delta_in.describe());
  MX_CHECK(weight.numel() == d, "add_rms_norm weight {} for rows of {}", weight.describe(), d);
  Tensor delta = to_device(delta_in);
  const Tensor& w = device_weight(weight, "add_rms_norm");
  Tensor out = fresh(DType::F32, residual.shape());
  update_in_place(residual, [&](Tensor& r) {
    launch_rms_norm(f32(r), f32(delta), w.raw(), w.dtype() == DType::BF16, rows, d, eps, f32(out), stream_);
    check_launch("add_rms_norm");
  });
  return out;
}

void CudaOps::add_inplace(Tensor& x, const Tensor& delta) { axpy_inplace(x, delta, 1.0f); }

void CudaOps::axpy_inplace(Tensor& x, const Tensor& delta_in, float scale) {
  activation_rows(x, "add");
  activation_rows(delta_in, "add");
  MX_CHECK(x.numel() == delta_in.numel(), "add: {} and {}", x.describe(), delta_in.describe());
  Tensor delta = to_device(delta_in);
  update_in_place(x, [&](Tensor& dx) {
    launch_axpy(f32(dx), f32(delta), scale, dx.numel(), stream_);
    check_launch("axpy_inplace");
  });
}

void CudaOps::rope_inplace(Tensor& x, const std::vector<int32_t>& positions, const RopeTable& rope, int64_t heads,
                           int64_t head_stride, int64_t offset) {
  const int64_t rows = activation_rows(x, "rope"), d = row_width(x), half = rope.rotary_dim / 2;
  MX_CHECK(int64_t(positions.size()) == rows, "rope: {} positions for {} rows", positions.size(), rows);
  MX_CHECK(heads * head_stride <= d && offset + rope.rotary_dim <= head_stride, "rope: {} heads of stride {} in {}",
           heads, head_stride, x.describe());
  MX_CHECK(int64_t(rope.inv_freq.size()) == half, "rope: {} inverse frequencies for rotary_dim {}",
           rope.inv_freq.size(), rope.rotary_dim);
  // The step's positions were uploaded by prepare(); anything else is uploaded here.
  Tensor keep;
  const auto* pos = static_cast<const int32_t*>(step_data(positions.data(), positions.size(), 4, keep, "rope"));
  auto it = rope_freqs_.find(rope.inv_freq);
  if (it == rope_freqs_.end()) {
    Tensor h = Tensor::from_f32(rope.inv_freq, {half});
    it = rope_freqs_.emplace(rope.inv_freq, copy_to_device(h, stream_)).first;
    check_cuda(cudaStreamSynchronize(stream_), "rope", "frequency upload");
  }
  update_in_place(x, [&](Tensor& dx) {
    launch_rope(f32(dx), pos, f32(it->second), rows, d, heads, head_stride, offset, half,
                rope.style == RopeTable::Style::Interleaved, rope.attention_factor, stream_);
    check_launch("rope_inplace");
  });
}

Tensor CudaOps::silu_and_mul(const Tensor& gate_in, const Tensor& up_in) {
  activation_rows(gate_in, "silu_and_mul");
  MX_CHECK(gate_in.shape() == up_in.shape(), "silu_and_mul: {} and {}", gate_in.describe(), up_in.describe());
  Tensor gate = to_device(gate_in), up = to_device(up_in);
  Tensor out = fresh(DType::F32, gate.shape());
  launch_silu_and_mul(f32(gate), f32(up), gate.numel(), f32(out), stream_);
  check_launch("silu_and_mul");
  return out;
}

Tensor CudaOps::slice_cols(const Tensor& x_in, int64_t groups, int64_t begin, int64_t end) {
  const int64_t rows = activation_rows(x_in, "slice_cols"), d = row_width(x_in);
  MX_CHECK(groups > 0 && d % groups == 0 && 0 <= begin && begin <= end && end <= d / groups,
           "slice_cols [{}, {}) of {} groups in {}", begin, end, groups, x_in.describe());
  Tensor x = to_device(x_in);
  const int64_t w = end - begin;
  Tensor out = fresh(DType::F32, {rows, groups * w});
  launch_slice_cols(f32(x), rows, groups, d / groups, begin, w, f32(out), stream_);
  check_launch("slice_cols");
  return out;
}

Tensor CudaOps::gather_rows(const Tensor& x_in, const std::vector<int64_t>& rows) {
  const int64_t n = activation_rows(x_in, "gather_rows"), d = row_width(x_in);
  Tensor keep;
  const int64_t* idx = device_rows(rows, n, keep, "gather_rows");
  Tensor x = to_device(x_in);
  Shape s = x.shape();
  s[0] = int64_t(rows.size());
  Tensor out = fresh(DType::F32, s);
  launch_gather_rows(f32(x), idx, int64_t(rows.size()), d, f32(out), stream_);
  check_launch("gather_rows");
  return out;
}

void CudaOps::scatter_rows(Tensor& dst, const std::vector<int64_t>& rows, const Tensor& src_in) {
  const int64_t n = activation_rows(dst, "scatter_rows"), d = row_width(dst);
  MX_CHECK(src_in.numel() == int64_t(rows.size()) * d, "scatter_rows: {} rows of {} into {}", rows.size(),
           src_in.describe(), dst.describe());
  Tensor keep;
  const int64_t* idx = device_rows(rows, n, keep, "scatter_rows");
  Tensor src = to_device(src_in);
  update_in_place(dst, [&](Tensor& dd) {
    launch_scatter_rows(f32(dd), idx, int64_t(rows.size()), d, f32(src), stream_);
    check_launch("scatter_rows");
  });
}

Tensor CudaOps::concat_cols(const Tensor& a_in, const Tensor& b_in, int64_t groups, bool shared_b) {
  const int64_t rows = activation_rows(a_in, "concat_cols");
  activation_rows(b_in, "concat_cols");
  MX_CHECK(groups > 0 && b_in.dim(0) == rows && row_width(a_in) % groups == 0, "concat_cols: {} and {} in {} groups",
           a_in.describe(), b_in.describe(), groups);
  const int64_t da = row_width(a_in) / groups, bw = row_width(b_in);
  MX_CHECK(shared_b || bw % groups == 0, "concat_cols: {} is not {} groups", b_in.describe(), groups);
  const int64_t db = shared_b ? bw : bw / groups;
  Tensor a = to_device(a_in), b = to_device(b_in);
  Tensor out = fresh(DType::F32, {rows, groups, da + db});
  launch_concat_cols(f32(a), f32(b), rows, groups, da, db, shared_b, f32(out), stream_);
  check_launch("concat_cols");
  return out;
}

std::unique_ptr<Ops> make_cuda_ops(ActivationMode mode, CudaOpsOptions options) {
  return std::make_unique<CudaOps>(mode, options);
}

}  // namespace mx::cuda
