// GPU parity of the CUDA backend (src/cuda/backend) against the CPU reference
// backend: every op with a CUDA kernel runs on FRESH random inputs (a new seed
// per run, printed) with its device outputs poisoned with NaN before the kernel
// runs, and the result is compared with make_cpu_ops on the same inputs.
// Metric: max |gpu - cpu| / max |cpu| over the output (any NaN/Inf fails).
// Exit status 0 only if every case is within its threshold. Needs an sm_90 GPU.
//   ops_parity [--seed N]
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include "core/dtype.h"
#include "core/error.h"
#include "cuda/backend/cuda_ops.h"
#include "ops/ops.h"
#include "quant/mxfp4.h"

namespace mx {
namespace {

// Thresholds per activation/weight dtype (see docs/cuda-backend.md). Both
// backends compute in F32; only the summation order and libm vs CUDA
// sin/cos/exp differ, so F32 results agree to a few ulps of the largest value.
constexpr double kExact = 0.0;         // embedding: a copy / exact widening
constexpr double kF32Elementwise = 2e-6;  // silu_and_mul, rope (cosf/sinf/expf vs libm)
constexpr double kF32Reduction = 1e-5;    // rms_norm, linear (F32 accumulation, different order)
// MXFP4 linear: mxfp4_gemm takes BF16 activations and writes BF16; compared
// with the CPU on the same BF16-rounded x, only the output rounding (2^-8 of a
// value at most) and the summation order differ.
constexpr double kBf16Output = 5e-3;

struct Result {
  std::string op, shape;
  double rel_err = 0, threshold = 0;
  bool finite = true;
  bool pass() const { return finite && rel_err <= threshold; }
};

std::mt19937_64 rng;

Tensor random_f32(Shape shape, float scale = 1.0f) {
  Tensor t = Tensor::empty(DType::F32, std::move(shape));
  std::normal_distribution<float> dist(0.0f, scale);
  for (int64_t i = 0; i < t.numel(); ++i) t.data<float>()[i] = dist(rng);
  return t;
}

Tensor random_like_dtype(DType dtype, Shape shape, float scale = 1.0f) {
  Tensor f = random_f32(std::move(shape), scale);
  return dtype == DType::F32 ? f : f.to(dtype);
}

Result compare(const std::string& op, const std::string& shape, const Tensor& gpu, const Tensor& cpu,
               double threshold) {
  Result r{op, shape, 0, threshold, true};
  MX_CHECK(gpu.numel() == cpu.numel(), "{}: {} vs {}", op, gpu.describe(), cpu.describe());
  double max_ref = 0, max_err = 0;
  const float *g = gpu.data<float>(), *c = cpu.data<float>();
  for (int64_t i = 0; i < cpu.numel(); ++i) {
    if (!std::isfinite(g[i])) r.finite = false;
    max_ref = std::max(max_ref, std::fabs(double(c[i])));
    max_err = std::max(max_err, std::fabs(double(g[i]) - double(c[i])));
  }
  r.rel_err = max_ref > 0 ? max_err / max_ref : max_err;
  return r;
}

const char* weight_label(DType d) { return d == DType::BF16 ? "bf16" : "f32"; }

void run_all(Ops& gpu, Ops& cpu, std::vector<Result>& out) {
  for (DType wd : {DType::F32, DType::BF16}) {
    for (auto [vocab, d, tokens] : {std::tuple{1000, 896, 1}, std::tuple{32000, 4096, 37}}) {
      Tensor table = random_like_dtype(wd, {vocab, d});
      std::vector<int32_t> ids(static_cast<size_t>(tokens));
      std::uniform_int_distribution<int32_t> pick(0, vocab - 1);
      for (auto& id : ids) id = pick(rng);
      ids.back() = vocab - 1;  // the last row of the table
      out.push_back(compare("embedding", fmt::format("{}[{},{}] x{}", weight_label(wd), vocab, d, tokens),
                            gpu.embedding(table, ids), cpu.embedding(table, ids), kExact));
    }
    for (auto [rows, d] : {std::pair{1, 896}, std::pair{33, 7168}, std::pair{5, 131}}) {
      Tensor x = random_f32({rows, d}, 3.0f), w = random_like_dtype(wd, {d}), delta = random_f32({rows, d});
      std::string s = fmt::format("{}w [{},{}]", weight_label(wd), rows, d);
      out.push_back(compare("rms_norm", s, gpu.rms_norm(x, w, 1e-6f), cpu.rms_norm(x, w, 1e-6f), kF32Reduction));
      Tensor res_gpu = x.clone(), res_cpu = x.clone();
      Tensor y_gpu = gpu.add_rms_norm(res_gpu, delta, w, 1e-5f), y_cpu = cpu.add_rms_norm(res_cpu, delta, w, 1e-5f);
      out.push_back(compare("add_rms_norm", s, y_gpu, y_cpu, kF32Reduction));
      out.push_back(compare("add_rms_norm.residual", s, res_gpu, res_cpu, kF32Elementwise));
    }
    for (auto [M, N, K] : {std::tuple{1, 2048, 7168}, std::tuple{7, 576, 896}, std::tuple{64, 1000, 1031}}) {
      LinearWeight lw;
      lw.format = WeightFormat::Dense;
      lw.out_features = N, lw.in_features = K;
      lw.weight = random_like_dtype(wd, {N, K}, 0.05f);
      if (M == 7) lw.bias = random_f32({N});
      Tensor x = random_f32({M, K});
      out.push_back(compare("linear", fmt::format("{}w M{} N{} K{}{}", weight_label(wd), M, N, K, M == 7 ? " +bias" : ""),
                            gpu.linear(x, lw), cpu.linear(x, lw), kF32Reduction));
    }
  }
  for (auto [M, N, K] : {std::tuple{1, 2048, 7168}, std::tuple{7, 576, 896}, std::tuple{100, 1024, 1024}}) {
    Tensor wf = random_f32({N, K}, 0.05f);
    Mxfp4Matrix q = mxfp4_quantize_matrix(wf.data<float>(), N, K);
    LinearWeight lw;
    lw.format = WeightFormat::Mxfp4;
    lw.name = "parity.mxfp4";
    lw.out_features = N, lw.in_features = K;
    lw.weight = q.weight, lw.scale = q.scale;
    if (M == 7) lw.bias = random_f32({N});
    Tensor x = random_f32({M, K}).to(DType::BF16).to(DType::F32);  // the kernel's input precision
    out.push_back(compare("linear", fmt::format("mxfp4 M{} N{} K{}{}", M, N, K, M == 7 ? " +bias" : ""),
                          gpu.linear(x, lw), cpu.linear(x, lw), kBf16Output));
  }
  for (int64_t n : {int64_t(18432), int64_t(37) * 2048 + 5}) {
    Tensor g = random_f32({1, n}, 4.0f), u = random_f32({1, n});
    out.push_back(compare("silu_and_mul", fmt::format("[1,{}]", n), gpu.silu_and_mul(g, u), cpu.silu_and_mul(g, u),
                          kF32Elementwise));
  }
  // Rope: a plain neox Llama head, an MLA-style interleaved tail of a wider
  // head (offset 128 of 192) with YaRN's inverse frequencies and factor.
  struct RopeCase {
    RopeTable::Style style;
    RopeScaling scaling;
    int64_t tokens, heads, head_stride, offset, rotary_dim;
  };
  RopeScaling yarn;
  yarn.type = "yarn", yarn.factor = 40, yarn.original_max_position_embeddings = 4096, yarn.mscale = 1,
  yarn.mscale_all_dim = 1;
  for (const RopeCase& c : {RopeCase{RopeTable::Style::Neox, {}, 9, 32, 128, 0, 128},
                            RopeCase{RopeTable::Style::Interleaved, yarn, 17, 16, 192, 128, 64},
                            RopeCase{RopeTable::Style::Neox, {}, 3, 8, 64, 0, 32}}) {
    RopeTable table = make_rope_table(c.scaling, 10000.0, c.rotary_dim, 163840, c.style);
    if (c.scaling.type == "yarn") table.attention_factor = 1.1f;
    Tensor x = random_f32({c.tokens, c.heads * c.head_stride});
    std::vector<int32_t> pos(static_cast<size_t>(c.tokens));
    std::uniform_int_distribution<int32_t> p(0, 8191);
    for (auto& v : pos) v = p(rng);
    Tensor xg = x.clone(), xc = x.clone();
    gpu.rope_inplace(xg, pos, table, c.heads, c.head_stride, c.offset);
    cpu.rope_inplace(xc, pos, table, c.heads, c.head_stride, c.offset);
    out.push_back(compare("rope_inplace",
                          fmt::format("{} {}x{}h/{} off{} rd{}", c.style == RopeTable::Style::Neox ? "neox" : "inter",
                                      c.tokens, c.heads, c.head_stride, c.offset, c.rotary_dim),
                          xg, xc, kF32Elementwise));
  }
}

// The comparison itself must catch a wrong result: one element off by 1e-3 of
// the largest value, and one NaN, must both fail.
bool comparator_catches_errors() {
  Tensor ref = random_f32({4, 64}), bad = ref.clone();
  float max_ref = 0;
  for (int64_t i = 0; i < ref.numel(); ++i) max_ref = std::max(max_ref, std::fabs(ref.data<float>()[i]));
  bad.data<float>()[77] += 1e-3f * max_ref;
  Tensor nan = ref.clone();
  nan.data<float>()[5] = std::nanf("");
  return !compare("x", "", bad, ref, kF32Reduction).pass() && !compare("x", "", nan, ref, kF32Reduction).pass() &&
         compare("x", "", ref.clone(), ref, kExact).pass();
}

}  // namespace
}  // namespace mx

int main(int argc, char** argv) {
  uint64_t seed = std::random_device{}();
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--seed") == 0 && i + 1 < argc) seed = std::strtoull(argv[++i], nullptr, 10);
    else {
      std::fprintf(stderr, "usage: %s [--seed N]\n", argv[0]);
      return 2;
    }
  }
  mx::rng.seed(seed);
  try {
    if (!mx::comparator_catches_errors()) {
      std::printf("FAIL: the comparison does not catch a wrong element\n");
      return 1;
    }
    auto cpu = mx::make_cpu_ops(mx::ActivationMode::W4A16);
    mx::cuda::CudaOpsOptions opt;
    opt.poison_outputs = true;
    auto gpu = mx::cuda::make_cuda_ops(mx::ActivationMode::W4A16, opt);
    std::vector<mx::Result> results;
    mx::run_all(*gpu, *cpu, results);
    int failed = 0;
    std::printf("seed %llu; outputs poisoned with NaN before each kernel; rel = max|gpu-cpu| / max|cpu|\n",
                static_cast<unsigned long long>(seed));
    std::printf("| op | case | rel err | threshold | result |\n|---|---|---|---|---|\n");
    for (const auto& r : results) {
      failed += !r.pass();
      std::printf("| %s | %s | %.3g%s | %.0e | %s |\n", r.op.c_str(), r.shape.c_str(), r.rel_err,
                  r.finite ? "" : " (NaN/Inf)", r.threshold, r.pass() ? "ok" : "FAIL");
    }
    std::printf("%zu cases, %d failed\n", results.size(), failed);
    return failed ? 1 : 0;
  } catch (const std::exception& e) {
    std::printf("FAIL: %s\n", e.what());
    return 1;
  }
}
