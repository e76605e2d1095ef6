// CudaOps: host side of the CUDA backend (see cuda_ops.h).
#include "cuda/backend/cuda_ops.h"

#include "core/error.h"
#include "cuda/backend/kernels.h"
#include "cuda/host/mxfp4_layout.h"
#include "cuda/mxfp4_kernels.h"

namespace mx::cuda {
namespace {

void check(cudaError_t err, const char* op, const char* what) {
  if (err != cudaSuccess) fail("CUDA backend, op {}: {} failed: {}", op, what, cudaGetErrorString(err));
}

int64_t activation_rows(const Tensor& x, const char* op) {
  if (!x.defined() || x.dtype() != DType::F32 || x.ndim() < 1)
    fail_input("{}: expected an F32 activation, got {}", op, x.defined() ? x.describe() : "undefined");
  return x.dim(0);
}

int64_t row_width(const Tensor& x) { return x.dim(0) ? x.numel() / x.dim(0) : 0; }

// The weight dtypes the kernels read directly.
bool is_bf16_or_f32(const Tensor& w) { return w.dtype() == DType::BF16 || w.dtype() == DType::F32; }

}  // namespace

DeviceBuffer::DeviceBuffer(size_t bytes, const char* op) : bytes_(bytes) {
  if (bytes) check(cudaMalloc(&ptr_, bytes), op, "cudaMalloc");
}

DeviceBuffer::~DeviceBuffer() {
  if (ptr_) cudaFree(ptr_);
}

DeviceBuffer& DeviceBuffer::operator=(DeviceBuffer&& o) noexcept {
  if (this != &o) {
    if (ptr_) cudaFree(ptr_);
    ptr_ = o.ptr_, bytes_ = o.bytes_;
    o.ptr_ = nullptr, o.bytes_ = 0;
  }
  return *this;
}

CudaOps::CudaOps(ActivationMode mode, CudaOpsOptions options)
    : options_(options), mode_(mode), cpu_(make_cpu_ops(mode)) {
  check(cudaSetDevice(options_.device), "init", "cudaSetDevice");
  check(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking), "init", "cudaStreamCreate");
}

CudaOps::~CudaOps() {
  weights_.clear();
  mxfp4_weights_.clear();
  if (stream_) cudaStreamDestroy(stream_);
}

std::vector<std::string> CudaOps::gpu_ops() {
  return {"embedding", "rms_norm", "add_rms_norm", "rope_inplace", "silu_and_mul", "linear (Dense F32/BF16)",
          "linear (MXFP4, W4A16 with BF16 activations)"};
}

DeviceBuffer CudaOps::upload(const void* host, size_t bytes, const char* op) {
  DeviceBuffer d(bytes, op);
  if (bytes) check(cudaMemcpyAsync(d.get(), host, bytes, cudaMemcpyHostToDevice, stream_), op, "upload");
  return d;
}

DeviceBuffer CudaOps::output(size_t bytes, const char* op) {
  DeviceBuffer d(bytes, op);
  // 0xFF bytes are a NaN in F32.
  if (options_.poison_outputs && bytes) check(cudaMemsetAsync(d.get(), 0xFF, bytes, stream_), op, "poison");
  return d;
}

const void* CudaOps::device_weight(const Tensor& w, const char* op) {
  auto key = std::make_pair(static_cast<const uint8_t*>(w.raw()), w.nbytes());
  auto it = weights_.find(key);
  if (it == weights_.end()) {
    CachedWeight c{w.storage(), upload(w.raw(), w.nbytes(), op)};
    it = weights_.emplace(key, std::move(c)).first;
  }
  return it->second.buffer.get();
}

Tensor CudaOps::download(const DeviceBuffer& d, Shape shape, const char* op) {
  Tensor out = Tensor::empty(DType::F32, std::move(shape));
  if (out.nbytes()) check(cudaMemcpyAsync(out.raw(), d.get(), out.nbytes(), cudaMemcpyDeviceToHost, stream_), op,
                          "download");
  finish(op);
  return out;
}

void CudaOps::finish(const char* op) {
  check(cudaGetLastError(), op, "kernel launch");
  check(cudaStreamSynchronize(stream_), op, "cudaStreamSynchronize");
}

Tensor CudaOps::embedding(const Tensor& table, const std::vector<int32_t>& ids) {
  if (table.ndim() != 2 || !is_bf16_or_f32(table)) return cpu_->embedding(table, ids);
  const int64_t vocab = table.dim(0), d = table.dim(1), tokens = int64_t(ids.size());
  for (int32_t id : ids)
    if (id < 0 || id >= vocab) fail_input("token id {} is outside the vocabulary [0, {})", id, vocab);
  const void* t = device_weight(table, "embedding");
  DeviceBuffer dids = upload(ids.data(), ids.size() * sizeof(int32_t), "embedding");
  DeviceBuffer out = output(size_t(tokens * d) * 4, "embedding");
  launch_embedding(t, table.dtype() == DType::BF16, dids.get<int32_t>(), tokens, d, out.get<float>(), stream_);
  return download(out, {tokens, d}, "embedding");
}

Tensor CudaOps::rms_norm(const Tensor& x, const Tensor& weight, float eps) {
  const int64_t rows = activation_rows(x, "rms_norm"), d = row_width(x);
  MX_CHECK(weight.numel() == d, "rms_norm weight {} for rows of {}", weight.describe(), d);
  if (!is_bf16_or_f32(weight)) return cpu_->rms_norm(x, weight, eps);
  const void* w = device_weight(weight, "rms_norm");
  DeviceBuffer dx = upload(x.raw(), x.nbytes(), "rms_norm");
  DeviceBuffer out = output(x.nbytes(), "rms_norm");
  launch_rms_norm(dx.get<float>(), nullptr, w, weight.dtype() == DType::BF16, rows, d, eps, out.get<float>(), stream_);
  return download(out, x.shape(), "rms_norm");
}

Tensor CudaOps::add_rms_norm(Tensor& residual, const Tensor& delta, const Tensor& weight, float eps) {
  const int64_t rows = activation_rows(residual, "add_rms_norm"), d = row_width(residual);
  activation_rows(delta, "add_rms_norm");
  MX_CHECK(residual.numel() == delta.numel(), "add_rms_norm: {} and {}", residual.describe(), delta.describe());
  MX_CHECK(weight.numel() == d, "add_rms_norm weight {} for rows of {}", weight.describe(), d);
  if (!is_bf16_or_f32(weight)) return cpu_->add_rms_norm(residual, delta, weight, eps);
  const void* w = device_weight(weight, "add_rms_norm");
  DeviceBuffer dres = upload(residual.raw(), residual.nbytes(), "add_rms_norm");
  DeviceBuffer ddelta = upload(delta.raw(), delta.nbytes(), "add_rms_norm");
  DeviceBuffer out = output(residual.nbytes(), "add_rms_norm");
  launch_rms_norm(dres.get<float>(), ddelta.get<float>(), w, weight.dtype() == DType::BF16, rows, d, eps,
                  out.get<float>(), stream_);
  // The updated residual comes back too (the op's contract: residual += delta).
  check(cudaMemcpyAsync(residual.raw(), dres.get(), residual.nbytes(), cudaMemcpyDeviceToHost, stream_),
        "add_rms_norm", "download residual");
  return download(out, residual.shape(), "add_rms_norm");
}

void CudaOps::rope_inplace(Tensor& x, const std::vector<int32_t>& positions, const RopeTable& rope, int64_t heads,
                           int64_t head_stride, int64_t offset) {
  const int64_t rows = activation_rows(x, "rope"), d = row_width(x), half = rope.rotary_dim / 2;
  MX_CHECK(int64_t(positions.size()) == rows, "rope: {} positions for {} rows", positions.size(), rows);
  MX_CHECK(heads * head_stride <= d && offset + rope.rotary_dim <= head_stride, "rope: {} heads of stride {} in {}",
           heads, head_stride, x.describe());
  MX_CHECK(int64_t(rope.inv_freq.size()) == half, "rope: {} inverse frequencies for rotary_dim {}",
           rope.inv_freq.size(), rope.rotary_dim);
  DeviceBuffer dx = upload(x.raw(), x.nbytes(), "rope");
  DeviceBuffer dpos = upload(positions.data(), positions.size() * sizeof(int32_t), "rope");
  DeviceBuffer dfreq = upload(rope.inv_freq.data(), rope.inv_freq.size() * sizeof(float), "rope");
  launch_rope(dx.get<float>(), dpos.get<int32_t>(), dfreq.get<float>(), rows, d, heads, head_stride, offset, half,
              rope.style == RopeTable::Style::Interleaved, rope.attention_factor, stream_);
  check(cudaMemcpyAsync(x.raw(), dx.get(), x.nbytes(), cudaMemcpyDeviceToHost, stream_), "rope", "download");
  finish("rope");
}

Tensor CudaOps::silu_and_mul(const Tensor& gate, const Tensor& up) {
  activation_rows(gate, "silu_and_mul");
  MX_CHECK(gate.shape() == up.shape(), "silu_and_mul: {} and {}", gate.describe(), up.describe());
  DeviceBuffer dg = upload(gate.raw(), gate.nbytes(), "silu_and_mul");
  DeviceBuffer du = upload(up.raw(), up.nbytes(), "silu_and_mul");
  DeviceBuffer out = output(gate.nbytes(), "silu_and_mul");
  launch_silu_and_mul(dg.get<float>(), du.get<float>(), gate.numel(), out.get<float>(), stream_);
  return download(out, gate.shape(), "silu_and_mul");
}

Tensor CudaOps::linear_mxfp4(const Tensor& x, const LinearWeight& w) {
  const int64_t M = activation_rows(x, "linear"), K = w.in_features, N = w.out_features;
  MX_CHECK(x.numel() == M * K && int64_t(w.weight.nbytes()) == N * K / 2 && int64_t(w.scale.nbytes()) == N * K / 32,
           "linear {}: input {} for MXFP4 weight {} / scale {} [{}, {}]", w.name, x.describe(), w.weight.describe(),
           w.scale.describe(), N, K);
  auto it = mxfp4_weights_.find(w.weight.data<uint8_t>());
  if (it == mxfp4_weights_.end()) {
    PackedMxfp4 p = pack_mxfp4({w.weight.data<uint8_t>(), size_t(w.weight.numel())},
                               {w.scale.data<uint8_t>(), size_t(w.scale.numel())}, N, K, w.name.c_str());
    PackedWeight pw{w.weight.storage(), upload(p.codes.data(), p.codes.size(), "linear"),
                    upload(p.scales.data(), p.scales.size(), "linear"), p.big_scales};
    finish("linear");  // p's host bytes must outlive the copies
    it = mxfp4_weights_.emplace(w.weight.data<uint8_t>(), std::move(pw)).first;
  }
  Mxfp4DeviceWeight dw{it->second.codes.get<uint8_t>(), it->second.scales.get<uint8_t>(), N, K,
                       it->second.big_scales};
  const float* dbias = nullptr;
  if (w.bias.defined()) {
    MX_CHECK(w.bias.dtype() == DType::F32 && w.bias.numel() == N, "linear: bias {} for {} outputs",
             w.bias.describe(), N);
    dbias = static_cast<const float*>(device_weight(w.bias, "linear"));
  }
  DeviceBuffer dx = upload(x.raw(), x.nbytes(), "linear");
  DeviceBuffer xb = output(size_t(M * K) * 2, "linear"), yb = output(size_t(M * N) * 2, "linear");
  DeviceBuffer out = output(size_t(M * N) * 4, "linear");
  launch_f32_to_bf16(dx.get<float>(), M * K, xb.get<uint16_t>(), stream_);
  mxfp4_gemm(dw, xb.get<uint16_t>(), int(M), yb.get<uint16_t>(), stream_);
  launch_bf16_to_f32_bias(yb.get<uint16_t>(), dbias, M, N, out.get<float>(), stream_);
  return download(out, {M, N}, "linear");
}

Tensor CudaOps::linear(const Tensor& x, const LinearWeight& w) {
  if (w.format == WeightFormat::Mxfp4) {
    const bool w4a4 = mode_ == ActivationMode::W4A4 && w.quantize_input;
    const bool packable = w.out_features % 16 == 0 && w.in_features % 64 == 0 && w.out_features > 0 &&
                          w.weight.dtype() == DType::U8 && w.scale.defined() &&
                          (w.scale.dtype() == DType::U8 || w.scale.dtype() == DType::E8M0);
    if (!w4a4 && packable && activation_rows(x, "linear") > 0) return linear_mxfp4(x, w);
    return cpu_->linear(x, w);
  }
  // Dense F32/BF16 weights run the kernel below; FP8, INT4 and F16 run on the
  // CPU reference.
  if (w.format != WeightFormat::Dense || !is_bf16_or_f32(w.weight)) return cpu_->linear(x, w);
  const int64_t M = activation_rows(x, "linear"), K = row_width(x), N = w.out_features;
  MX_CHECK(K == w.in_features && w.weight.numel() == N * K, "linear: input {} for weight {} [{}, {}]", x.describe(),
           w.weight.describe(), N, K);
  const void* dw = device_weight(w.weight, "linear");
  const float* dbias = nullptr;
  if (w.bias.defined()) {
    MX_CHECK(w.bias.dtype() == DType::F32 && w.bias.numel() == N, "linear: bias {} for {} outputs",
             w.bias.describe(), N);
    dbias = static_cast<const float*>(device_weight(w.bias, "linear"));
  }
  DeviceBuffer dx = upload(x.raw(), x.nbytes(), "linear");
  DeviceBuffer out = output(size_t(M * N) * 4, "linear");
  launch_dense_linear(dx.get<float>(), dw, w.weight.dtype() == DType::BF16, dbias, M, N, K, out.get<float>(), stream_);
  return download(out, {M, N}, "linear");
}

std::unique_ptr<Ops> make_cuda_ops(ActivationMode mode, CudaOpsOptions options) {
  return std::make_unique<CudaOps>(mode, options);
}

}  // namespace mx::cuda
