// CudaOps::linear and head_matmul. Each LinearWeight is made device-ready once
// (device_linear) and cached by the address of its host bytes:
//   Dense F32 / F16        -> F32 [N, K], cuBLAS SGEMM (F32 math, no TF32)
//   Dense BF16             -> BF16 [N, K], cuBLAS GemmEx on BF16 activations,
//                             F32 accumulate and output
//   MXFP4 (N%16, K%64)     -> the kernel layout (host/mxfp4_layout.h), mxfp4_gemm
//                             on BF16 activations; W4A4 quantize-dequantizes x
//                             (with --w4a4-mma fp8 also the FP8 dense layout,
//                             mxfp4_gemm_fp8 where fp8_dense_chosen)
//   FP8 block, INT4 group,
//   MXFP4 of other shapes  -> dequantized to BF16 once, the BF16 path
// With CudaOpsOptions::f32_activations Dense BF16 keeps F32 activations
// (launch_dense_linear) and FP8/INT4/MXFP4 dequantize to F32 (SGEMM): the
// CPU's numerics, for parity runs.
#include <cublas_v2.h>

#include "core/error.h"
#include "core/log.h"
#include "cuda/backend/cuda_ops.h"
#include "cuda/backend/device_memory.h"
#include "cuda/backend/kernels.h"
#include "cuda/host/dense_ring_plan.h"
#include "cuda/host/mxfp4_layout.h"
#include "cuda/mxfp4_kernels.h"

namespace mx::cuda {
namespace {

void check_cublas(cublasStatus_t s, const char* what) {
  if (s != CUBLAS_STATUS_SUCCESS) fail("CUDA backend: {} failed: cuBLAS status {}", what, int(s));
}

float* f32(const Tensor& t) { return reinterpret_cast<float*>(t.raw()); }
uint16_t* bf16(const Tensor& t) { return reinterpret_cast<uint16_t*>(t.raw()); }

bool mxfp4_packable(const LinearWeight& w) {
  return w.out_features > 0 && w.out_features % 16 == 0 && w.in_features % 64 == 0 && w.weight.dtype() == DType::U8 &&
         w.scale.defined() && (w.scale.dtype() == DType::U8 || w.scale.dtype() == DType::E8M0) &&
         w.weight.numel() == w.out_features * w.in_features / 2 &&
         w.scale.numel() == w.out_features * w.in_features / 32;
}

}  // namespace

const CudaOps::CachedLinear& CudaOps::device_linear(const LinearWeight& w) {
  MX_CHECK(w.defined(), "linear {}: weight not loaded", w.name);
  const uint8_t* key = w.weight.raw();
  if (auto it = linears_.find(key); it != linears_.end()) return it->second;
  MX_CHECK(!on_device(w.weight), "linear {}: weights are uploaded by the backend, got a device tensor", w.name);
  CachedLinear cl;
  cl.keep_alive = w.weight.storage();
  const int64_t N = w.out_features, K = w.in_features;
  if (w.format == WeightFormat::Mxfp4 && mxfp4_packable(w) && !options_.f32_activations) {
    PackedMxfp4 p = pack_mxfp4({w.weight.data<uint8_t>(), size_t(w.weight.numel())},
                               {w.scale.data<uint8_t>(), size_t(w.scale.numel())}, N, K, w.name.c_str());
    cl.kind = CachedLinear::Kind::Mxfp4;
    cl.weight = fresh(DType::U8, {int64_t(p.codes.size())});
    cl.scales = fresh(DType::U8, {int64_t(p.scales.size())});
    check_cuda(cudaMemcpyAsync(cl.weight.raw(), p.codes.data(), p.codes.size(), cudaMemcpyHostToDevice, stream_),
               "linear", "upload MXFP4 codes");
    check_cuda(cudaMemcpyAsync(cl.scales.raw(), p.scales.data(), p.scales.size(), cudaMemcpyHostToDevice, stream_),
               "linear", "upload MXFP4 scales");
    cl.big_scales = p.big_scales;
    check_cuda(cudaStreamSynchronize(stream_), "linear", "MXFP4 upload");  // p dies here
    // MoeConfig::w4a4_mma 2 and 3 are FP8 (--w4a4-mma fp8, fp8-256).
    if (mode_ == ActivationMode::W4A4 && w.quantize_input && options_.w4a4_mma >= 2) prepare_fp8_dense(cl, w);
  } else if (w.format == WeightFormat::Dense && w.weight.dtype() == DType::BF16) {
    MX_CHECK(w.weight.numel() == N * K, "linear {}: weight {} for [{}, {}]", w.name, w.weight.describe(), N, K);
    cl.kind = CachedLinear::Kind::Bf16;
    // Through the shared weight cache: a tied lm_head reuses the embedding's copy.
    cl.weight = device_weight(w.weight, "linear");
  } else if (w.format == WeightFormat::Dense && w.weight.dtype() == DType::F32) {
    MX_CHECK(w.weight.numel() == N * K, "linear {}: weight {} for [{}, {}]", w.name, w.weight.describe(), N, K);
    cl.kind = CachedLinear::Kind::F32;
    cl.weight = device_weight(w.weight, "linear");
  } else if (w.format == WeightFormat::Dense) {
    MX_CHECK(w.weight.numel() == N * K, "linear {}: weight {} for [{}, {}]", w.name, w.weight.describe(), N, K);
    cl.kind = CachedLinear::Kind::F32;
    cl.weight = copy_to_device(w.weight.to(DType::F32), stream_);  // F16 widened once
    check_cuda(cudaStreamSynchronize(stream_), "linear", "weight upload");  // the converted copy dies here
  } else {
    // FP8 block, INT4 group, unpackable MXFP4: the exact F32 dequantization
    // (ops.h), stored BF16 (or F32 in the reference mode).
    Tensor deq = dequantize_weight(w);
    if (options_.f32_activations) {
      cl.kind = CachedLinear::Kind::F32;
      cl.weight = copy_to_device(deq, stream_);
    } else {
      cl.kind = CachedLinear::Kind::Bf16;
      cl.weight = copy_to_device(deq.to(DType::BF16), stream_);
    }
    check_cuda(cudaStreamSynchronize(stream_), "linear", "dequantized upload");  // deq dies here
  }
  if (w.bias.defined()) {
    MX_CHECK(w.bias.numel() == N, "linear {}: bias {} for {} outputs", w.name, w.bias.describe(), N);
    cl.bias = copy_to_device(w.bias.dtype() == DType::F32 ? w.bias : w.bias.to(DType::F32), stream_);
    check_cuda(cudaStreamSynchronize(stream_), "linear", "bias upload");
  }
  return linears_.emplace(key, std::move(cl)).first->second;
}

Tensor CudaOps::linear(const Tensor& x_in, const LinearWeight& w) {
  if (!x_in.defined() || x_in.dtype() != DType::F32 || x_in.ndim() < 1)
    fail_input("linear {}: expected an F32 activation, got {}", w.name, x_in.defined() ? x_in.describe() : "undefined");
  const int64_t M = x_in.dim(0);
  if (x_in.numel() != M * w.in_features)
    fail("linear {}: input {} does not have {} features", w.name, x_in.describe(), w.in_features);
  const CachedLinear& cl = device_linear(w);
  return linear_on(to_device(x_in), cl, w);
}

Tensor CudaOps::linear_on(const Tensor& x, const CachedLinear& cl, const LinearWeight& w) {
  const int64_t M = x.dim(0), N = w.out_features, K = w.in_features;
  Tensor y = fresh(DType::F32, {M, N});
  if (M == 0) return y;
  const bool w4a4 = mode_ == ActivationMode::W4A4 && w.format == WeightFormat::Mxfp4 && w.quantize_input;
  if (cl.kind == CachedLinear::Kind::F32 && !w4a4) {
    const float one = 1.0f, zero = 0.0f;
    // Column-major view: y^T [N, M] = W [K, N]^T x^T [K, M].
    check_cublas(cublasSgemm(cublas_, CUBLAS_OP_T, CUBLAS_OP_N, int(N), int(M), int(K), &one, f32(cl.weight), int(K),
                             f32(x), int(K), &zero, f32(y), int(N)),
                 "linear (SGEMM)");
    if (cl.bias.defined()) launch_add_bias(f32(y), f32(cl.bias), M, N, stream_);
    check_launch("linear");
    return y;
  }
  if (cl.kind == CachedLinear::Kind::Bf16 && options_.f32_activations && !w4a4) {
    launch_dense_linear(f32(x), cl.weight.raw(), true, cl.bias.defined() ? f32(cl.bias) : nullptr, M, N, K, f32(y),
                        stream_);
    check_launch("linear");
    return y;
  }
  // BF16 activations: rounded, or quantize-dequantized per 32 (W4A4; the
  // values are exact in BF16, so this equals the CPU's F32 qdq).
  Tensor xb = fresh(DType::BF16, {M, K});
  if (w4a4) {
    MX_CHECK(K % 32 == 0, "linear {}: W4A4 needs in_features % 32 == 0, got {}", w.name, K);
    launch_mxfp4_qdq_f32_to_bf16(f32(x), M * K, bf16(xb), stream_);
  } else {
    launch_f32_to_bf16(f32(x), M * K, bf16(xb), stream_);
  }
  check_launch("linear");
  const float* bias = cl.bias.defined() ? f32(cl.bias) : nullptr;
  if (cl.kind == CachedLinear::Kind::Mxfp4) {
    Mxfp4DeviceWeight dw{cl.weight.data<uint8_t>(), cl.scales.data<uint8_t>(), N, K, cl.big_scales};
    Tensor yb = fresh(DType::BF16, {M, N});
    // W4A4 on FP8 tensor cores where it was measured faster: xb holds the
    // quantize-dequantized x, which the FP8 kernel's quantizer turns into the
    // same codes. Inside a capture before the stream's scratch grew, the
    // BF16 kernels on the same xb (the same contract).
    const bool fp8 = w4a4 && cl.fp8_codes.defined() && !options_.mxfp4_gemm_kernel &&
                     fp8_dense_chosen(N, K, int(M));
    if (fp8) {
      dw.fp8_codes = cl.fp8_codes.data<uint8_t>();
      dw.row_smax = cl.row_smax.data<uint8_t>();
    }
    if (fp8 && mxfp4_gemm_fp8(dw, bf16(xb), int(M), bf16(yb), stream_)) ++fp8_dense_runs_;
    else run_mxfp4_gemm(dw, bf16(xb), int(M), bf16(yb));
    launch_bf16_to_f32_bias(bf16(yb), bias, M, N, f32(y), stream_);
    check_launch("linear");
    return y;
  }
  if (cl.kind == CachedLinear::Kind::F32) {
    // W4A4 on an F32-dequantized MXFP4 weight (reference mode): widen back.
    Tensor xq = fresh(DType::F32, {M, K});
    launch_bf16_to_f32_bias(bf16(xb), nullptr, M, K, f32(xq), stream_);
    const float one = 1.0f, zero = 0.0f;
    check_cublas(cublasSgemm(cublas_, CUBLAS_OP_T, CUBLAS_OP_N, int(N), int(M), int(K), &one, f32(cl.weight), int(K),
                             f32(xq), int(K), &zero, f32(y), int(N)),
                 "linear (SGEMM)");
  } else {
    const float one = 1.0f, zero = 0.0f;
    check_cublas(cublasGemmEx(cublas_, CUBLAS_OP_T, CUBLAS_OP_N, int(N), int(M), int(K), &one, cl.weight.raw(),
                              CUDA_R_16BF, int(K), xb.raw(), CUDA_R_16BF, int(K), &zero, y.raw(), CUDA_R_32F, int(N),
                              CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
                 "linear (BF16 GEMM)");
  }
  if (bias) launch_add_bias(f32(y), bias, M, N, stream_);
  check_launch("linear");
  return y;
}

Tensor CudaOps::head_matmul(const Tensor& x_in, const Tensor& w_in, bool transpose_w) {
  if (!x_in.defined() || x_in.dtype() != DType::F32 || x_in.ndim() < 1)
    fail_input("head_matmul: expected an F32 activation, got {}", x_in.defined() ? x_in.describe() : "undefined");
  MX_CHECK(w_in.ndim() == 3 && w_in.dtype() == DType::F32, "head_matmul: weight must be F32 [heads, rows, cols], got {}",
           w_in.describe());
  const int64_t T = x_in.dim(0), H = w_in.dim(0);
  const int64_t a = transpose_w ? w_in.dim(1) : w_in.dim(2), b = transpose_w ? w_in.dim(2) : w_in.dim(1);
  MX_CHECK(x_in.numel() == T * H * a, "head_matmul: input {} for weight {}", x_in.describe(), w_in.describe());
  Tensor x = to_device(x_in);
  const Tensor& w = device_weight(w_in, "head_matmul");
  Tensor y = fresh(DType::F32, {T, H, b});
  if (T == 0 || H == 0) return y;
  const float one = 1.0f, zero = 0.0f;
  // Per head h, column-major: y_h^T [b, T] (ld H*b) = op(W_h) x_h^T [a, T] (ld H*a).
  //   transpose_w = false: W_h is [b, a] row-major = [a, b] column-major -> OP_T.
  //   transpose_w = true:  W_h is [a, b] row-major = [b, a] column-major -> OP_N.
  check_cublas(cublasSgemmStridedBatched(cublas_, transpose_w ? CUBLAS_OP_N : CUBLAS_OP_T, CUBLAS_OP_N, int(b), int(T),
                                         int(a), &one, f32(w), transpose_w ? int(b) : int(a), a * b, f32(x),
                                         int(H * a), a, &zero, f32(y), int(H * b), b, int(H)),
               "head_matmul (batched SGEMM)");
  check_launch("head_matmul");
  return y;
}

void CudaOps::prepare_fp8_dense(CachedLinear& cl, const LinearWeight& w) {
  const int64_t N = w.out_features, K = w.in_features;
  Mxfp4DeviceWeight dw{cl.weight.data<uint8_t>(), cl.scales.data<uint8_t>(), N, K, cl.big_scales};
  if (!mxfp4_fp8_dense_supported(dw)) return;
  Tensor codes = fresh(DType::U8, {cl.weight.numel()});
  Tensor row_smax = fresh(DType::U8, {N});
  Tensor slow = fresh(DType::I32, {1});
  pack_fp8_dense_device(dw, codes.data<uint8_t>(), row_smax.data<uint8_t>(), reinterpret_cast<int*>(slow.raw()),
                        stream_);
  int slow_blocks = 0;
  check_cuda(cudaMemcpyAsync(&slow_blocks, slow.raw(), sizeof(int), cudaMemcpyDeviceToHost, stream_), "linear",
             "FP8 layout");
  check_cuda(cudaStreamSynchronize(stream_), "linear", "FP8 layout");
  if (slow_blocks) {
    log::warn("linear {}: {} blocks lie more than 11 binades below their row's largest scale, beyond the FP8 fold "
              "table: its W4A4 stays on BF16 MMAs",
              w.name, slow_blocks);
    return;
  }
  cl.fp8_codes = std::move(codes);
  cl.row_smax = std::move(row_smax);
}

void CudaOps::run_mxfp4_gemm(const Mxfp4DeviceWeight& w, const uint16_t* x, int M, uint16_t* y) {
  if (options_.mxfp4_gemm_kernel) {
    GemmConfig forced;
    forced.kernel = options_.mxfp4_gemm_kernel;
    if (refused_gemm_.run_forced({M, w.rows, w.cols}, "--mxfp4-gemm-kernel",
                                 fmt::format("M={} N={} K={}", M, w.rows, w.cols),
                                 [&] { mxfp4_gemm(w, x, M, y, stream_, forced); }))
      return;
  }
  mxfp4_gemm(w, x, M, y, stream_);
}

}  // namespace mx::cuda
