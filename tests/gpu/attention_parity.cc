// GPU parity of CudaAttention (src/cuda/backend/cuda_attention.h) against the
// CPU reference backend (src/ops/cpu_attention.cc): every attention op on
// FRESH random inputs (a new seed per run, printed; --seed N repeats one).
// - The GPU KV cache is poisoned with 0xFF bytes (NaN in every dtype but FP8,
//   where 0xFF is NaN as well) after allocation, and every op output is
//   poisoned by CudaAttention itself, so an unwritten element or a read of the
//   wrong cache row shows up as NaN.
// - Block tables are random permutations of the cache blocks (with unused
//   blocks between sequences); block sizes 16 and 64; steps mix prefill,
//   chunked prefill against a cached prefix and decode; BF16, FP8 E4M3 and F32
//   caches; GQA/MHA and the MLA latent cache; every kernel choice.
// store_kv and gather_cached_k must be bit-exact (the CPU's written rows and
// scales, byte for byte). Attention: max |gpu - cpu| / max |cpu| under the
// threshold of the kernel path (any NaN/Inf fails). Prints a table last; exit
// status 1 on any failure. Needs an sm_90 GPU.
//   attention_parity [--seed N]
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "core/dtype.h"
#include "core/error.h"
#include "cuda/attention/attention_kernels.h"
#include "cuda/backend/cuda_attention.h"
#include "cuda/cuda_check.h"
#include "cuda/backend/device_memory.h"
#include "ops/ops.h"

namespace mx {
namespace {

using cuda::AttentionKernel;

// Thresholds (docs/cuda-attention.md). The cache dtype does not enter: both
// backends read the same stored values and dequantize them exactly.
constexpr double kExact = 0.0;         // store_kv bytes, gather_cached_k values
constexpr double kF32Path = 2e-5;      // CUDA-core kernel: F32 math, other summation order, expf
constexpr double kBf16Path = 1e-2;     // tensor cores (tensor-core, mla-decode): Q, K, V, P rounded to BF16

struct Result {
  std::string op, shape;
  double rel_err = 0, threshold = 0;
  bool finite = true;
  bool pass() const { return finite && rel_err <= threshold; }
};

std::mt19937_64 rng;
cudaStream_t stream = nullptr;

Tensor random_f32(Shape shape, float scale = 1.0f) {
  Tensor t = Tensor::empty(DType::F32, std::move(shape));
  std::normal_distribution<float> dist(0.0f, scale);
  for (int64_t i = 0; i < t.numel(); ++i) t.data<float>()[i] = dist(rng);
  return t;
}

Tensor to_device(const Tensor& t) { return cuda::copy_to_device(t, stream); }
Tensor to_host(const Tensor& t) { return cuda::copy_to_host(t, stream); }

Result compare(const std::string& op, const std::string& shape, const Tensor& gpu_device, const Tensor& cpu,
               double threshold) {
  Tensor gpu = to_host(gpu_device);
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

// Byte equality of the rows `slots` of a cache tensor (and of their scales).
Result compare_rows(const std::string& op, const std::string& shape, const Tensor& gpu_device, const Tensor& cpu,
                    const std::vector<int64_t>& slots) {
  Tensor gpu = to_host(gpu_device);
  const size_t row = cpu.nbytes() / size_t(cpu.dim(0) * cpu.dim(1));
  size_t differing = 0;
  for (int64_t s : slots) differing += std::memcmp(gpu.raw() + size_t(s) * row, cpu.raw() + size_t(s) * row, row) != 0;
  Result r{op, shape, double(differing), kExact, true};
  return r;
}

const char* dtype_label(DType d) { return d == DType::BF16 ? "bf16" : d == DType::F8E4M3 ? "fp8" : "f32"; }
const char* kernel_label(AttentionKernel k) {
  switch (k) {
    case AttentionKernel::Auto: return "auto";
    case AttentionKernel::Generic: return "generic";
    case AttentionKernel::TensorCore: return "tensor-core";
    case AttentionKernel::MlaDecode: return "mla-decode";
  }
  return "?";
}

void poison(const Tensor& t) {
  if (t.defined()) MX_CUDA_CHECK(cudaMemsetAsync(t.raw(), 0xFF, t.nbytes(), stream));
}

// One layer's cache on both backends, with the same contents.
struct CachePair {
  KvLayerCache gpu, cpu;
  int64_t heads, k_dim, v_dim;
  bool latent;
};

CachePair make_caches(cuda::CudaAttention& gpu, Ops& cpu, int64_t blocks, int64_t bs, int64_t heads, int64_t k_dim,
                      int64_t v_dim, bool latent, DType dtype) {
  CachePair c{gpu.allocate_kv(blocks, bs, heads, k_dim, v_dim, latent, dtype),
              cpu.allocate_kv(blocks, bs, heads, k_dim, v_dim, latent, dtype), heads, k_dim, v_dim, latent};
  for (const Tensor* t : {&c.gpu.k, &c.gpu.v, &c.gpu.k_scale, &c.gpu.v_scale}) poison(*t);
  return c;
}

// Writes rows through both backends' store_kv. Rows of a few tokens get an
// outlier so FP8's per-token scale differs from row to row.
void store_both(cuda::CudaAttention& gpu, Ops& cpu, CachePair& c, const std::vector<int64_t>& slots) {
  const int64_t n = int64_t(slots.size());
  Tensor k = random_f32({n, c.heads * c.k_dim}), v;
  for (int64_t t = 0; t < n; t += 7) k.data<float>()[t * c.heads * c.k_dim] = 40.0f;
  if (!c.latent) v = random_f32({n, c.heads * c.v_dim}, 2.0f);
  gpu.store_kv(c.gpu, to_device(k), c.latent ? Tensor() : to_device(v), slots);
  cpu.store_kv(c.cpu, k, v, slots);
}

struct SeqSpec {
  int64_t cached, fresh;
};

// A step over the given sequences: scrambled block tables over `blocks` cache
// blocks, slots of the new tokens, and the cached prefixes already stored.
AttentionMeta make_step(cuda::CudaAttention& gpu, Ops& cpu, CachePair& c, int64_t blocks, int64_t bs,
                        const std::vector<SeqSpec>& specs) {
  std::vector<int32_t> perm(static_cast<size_t>(blocks));
  std::iota(perm.begin(), perm.end(), 0);
  std::shuffle(perm.begin(), perm.end(), rng);
  size_t next = 0;
  AttentionMeta meta;
  meta.block_size = bs;
  std::vector<int64_t> prefix_slots;
  int64_t row = 0;
  for (const SeqSpec& s : specs) {
    AttentionSeq seq;
    seq.q_begin = row, seq.num_new = s.fresh, seq.num_cached = s.cached;
    const int64_t need = (s.cached + s.fresh + bs - 1) / bs;
    for (int64_t b = 0; b < need + 1; ++b) seq.block_table.push_back(perm.at(next++));  // +1: a spare block
    ++next;                                                                             // a block nobody uses
    for (int64_t j = 0; j < s.cached + s.fresh; ++j) {
      const int64_t slot = int64_t(seq.block_table[size_t(j / bs)]) * bs + j % bs;
      (j < s.cached ? prefix_slots : meta.slots).push_back(slot);
    }
    row += s.fresh;
    meta.seqs.push_back(std::move(seq));
  }
  MX_CHECK(next <= size_t(blocks), "test step needs {} blocks, cache has {}", next, blocks);
  if (!prefix_slots.empty()) store_both(gpu, cpu, c, prefix_slots);
  return meta;
}

int64_t blocks_for(const std::vector<SeqSpec>& specs, int64_t bs) {
  int64_t n = 0;
  for (const SeqSpec& s : specs) n += (s.cached + s.fresh + bs - 1) / bs + 2;
  return n + 3;
}

std::string seqs_label(const std::vector<SeqSpec>& specs) {
  std::string s;
  for (const SeqSpec& x : specs) s += fmt::format("{}{}+{}", s.empty() ? "" : ",", x.cached, x.fresh);
  return s;
}

struct PagedCase {
  int64_t q_heads, kv_heads, k_dim, v_dim;
  bool latent;
  std::vector<SeqSpec> seqs;
};

// The kernel CudaAttention picks for a case (cuda_attention.h's rules).
std::string kernel_path(const PagedCase& pc, DType dtype, AttentionKernel k) {
  const bool decode_only = std::all_of(pc.seqs.begin(), pc.seqs.end(), [](const SeqSpec& s) { return s.fresh == 1; });
  const bool mla = pc.latent && pc.kv_heads == 1 && pc.k_dim == 576 && pc.v_dim == 512 && dtype != DType::F32 &&
                   decode_only && (k == AttentionKernel::Auto || k == AttentionKernel::MlaDecode);
  if (mla) return "mla-decode";
  const bool tc = cuda::tensor_core_attention_supports(int(pc.k_dim), int(pc.v_dim)) &&
                  (k == AttentionKernel::TensorCore || (k == AttentionKernel::Auto && !decode_only));
  return tc ? "tensor-core" : "generic";
}

void run_paged(cuda::CudaAttention& gpu, Ops& cpu, const PagedCase& pc, DType dtype, int64_t bs,
               const std::vector<AttentionKernel>& kernels, std::vector<Result>& out) {
  const int64_t blocks = blocks_for(pc.seqs, bs);
  CachePair c = make_caches(gpu, cpu, blocks, bs, pc.kv_heads, pc.k_dim, pc.v_dim, pc.latent, dtype);
  gpu.begin_step();
  AttentionMeta meta = make_step(gpu, cpu, c, blocks, bs, pc.seqs);
  gpu.prepare(meta);
  store_both(gpu, cpu, c, meta.slots);  // the step's own tokens, through the prepared slots
  const std::string shape = fmt::format("{} bs{} {}q/{}kv d{}/{}{} [{}]", dtype_label(dtype), bs, pc.q_heads,
                                        pc.kv_heads, pc.k_dim, pc.v_dim, pc.latent ? " latent" : "",
                                        seqs_label(pc.seqs));
  out.push_back(compare_rows("store_kv k", shape, c.gpu.k, c.cpu.k, meta.slots));
  if (!pc.latent) out.push_back(compare_rows("store_kv v", shape, c.gpu.v, c.cpu.v, meta.slots));
  if (dtype == DType::F8E4M3) {
    std::vector<int64_t> all_slots;
    for (const AttentionSeq& s : meta.seqs)
      for (int64_t j = 0; j < s.num_cached + s.num_new; ++j)
        all_slots.push_back(int64_t(s.block_table[size_t(j / bs)]) * bs + j % bs);
    out.push_back(compare_rows("store_kv k_scale", shape, c.gpu.k_scale.reshape({blocks, bs, 1}),
                               c.cpu.k_scale.reshape({blocks, bs, 1}), all_slots));
    if (!pc.latent)
      out.push_back(compare_rows("store_kv v_scale", shape, c.gpu.v_scale.reshape({blocks, bs, 1}),
                                 c.cpu.v_scale.reshape({blocks, bs, 1}), all_slots));
  }
  const AttentionSeq& longest = *std::max_element(meta.seqs.begin(), meta.seqs.end(), [](auto& a, auto& b) {
    return a.num_cached + a.num_new < b.num_cached + b.num_new;
  });
  const int64_t ctx = longest.num_cached + longest.num_new;
  out.push_back(compare("gather_cached_k", shape, gpu.gather_cached_k(c.gpu, longest.block_table, ctx),
                        cpu.gather_cached_k(c.cpu, longest.block_table, ctx), kExact));

  int64_t tokens = 0;
  for (const SeqSpec& s : pc.seqs) tokens += s.fresh;
  Tensor q = random_f32({tokens, pc.q_heads, pc.k_dim});
  const float scale = float(1.0 / std::sqrt(double(pc.latent ? 192 : pc.k_dim)));
  Tensor ref = cpu.paged_attention(q, c.cpu, meta, scale);
  Tensor qd = to_device(q);
  for (AttentionKernel k : kernels) {
    gpu.set_kernel(k);
    const std::string path = kernel_path(pc, dtype, k);
    out.push_back(compare(fmt::format("paged_attention {} ({})", kernel_label(k), path), shape,
                          gpu.paged_attention(qd, c.gpu, meta, scale), ref,
                          path == "generic" ? kF32Path : kBf16Path));
  }
  gpu.set_kernel(AttentionKernel::Auto);
  // The same metadata never prepared (a copy at another address): uploaded ad hoc.
  AttentionMeta copy = meta;
  const std::string path = kernel_path(pc, dtype, AttentionKernel::Auto);
  out.push_back(compare(fmt::format("paged_attention unprepared ({})", path), shape,
                        gpu.paged_attention(qd, c.gpu, copy, scale), ref, path == "generic" ? kF32Path : kBf16Path));
}

void run_dense(cuda::CudaAttention& gpu, Ops& cpu, int64_t tq, int64_t tk, int64_t heads, int64_t kv_heads,
               int64_t dk, int64_t dv, std::vector<Result>& out) {
  Tensor q = random_f32({tq, heads, dk}), k = random_f32({tk, kv_heads, dk}), v = random_f32({tk, kv_heads, dv});
  const float scale = float(1.0 / std::sqrt(double(dk)));
  Tensor ref = cpu.attention(q, k, v, scale);
  Tensor qd = to_device(q), kd = to_device(k), vd = to_device(v);
  const std::string shape = fmt::format("q{} k{} {}h/{}kv d{}/{}", tq, tk, heads, kv_heads, dk, dv);
  for (AttentionKernel kn : {AttentionKernel::Auto, AttentionKernel::Generic}) {
    gpu.set_kernel(kn);
    const bool tc = kn == AttentionKernel::Auto && tq > 1 && cuda::tensor_core_attention_supports(int(dk), int(dv));
    out.push_back(compare(fmt::format("attention {}", kernel_label(kn)), shape, gpu.attention(qd, kd, vd, scale), ref,
                          tc ? kBf16Path : kF32Path));
  }
  gpu.set_kernel(AttentionKernel::Auto);
}

void run_all(cuda::CudaAttention& gpu, Ops& cpu, std::vector<Result>& out) {
  const std::vector<AttentionKernel> all = {AttentionKernel::Auto, AttentionKernel::Generic,
                                            AttentionKernel::TensorCore, AttentionKernel::MlaDecode};
  const std::vector<SeqSpec> mixed = {{0, 100}, {300, 70}, {517, 1}, {0, 1}, {1000, 1}, {64, 130}};
  const std::vector<SeqSpec> decode = {{3000, 1}, {17, 1}, {1500, 1}, {255, 1}};
  for (DType dtype : {DType::BF16, DType::F8E4M3, DType::F32}) {
    for (int64_t bs : {int64_t(16), int64_t(64)}) {
      run_paged(gpu, cpu, {32, 8, 128, 128, false, mixed}, dtype, bs, all, out);         // Llama GQA
      run_paged(gpu, cpu, {32, 8, 128, 128, false, decode}, dtype, bs, all, out);        // decode, split keys
      run_paged(gpu, cpu, {16, 1, 576, 512, true, decode}, dtype, bs, all, out);         // MLA absorbed decode
    }
  }
  for (DType dtype : {DType::BF16, DType::F8E4M3}) {
    run_paged(gpu, cpu, {8, 2, 32, 32, false, mixed}, dtype, 16, all, out);           // synth llama (head_dim 32)
    run_paged(gpu, cpu, {16, 4, 64, 64, false, mixed}, dtype, 64, all, out);          // head_dim 64
    run_paged(gpu, cpu, {9, 3, 64, 64, false, mixed}, dtype, 16, all, out);           // default model (SmolLM2): group 3
    run_paged(gpu, cpu, {4, 4, 80, 80, false, mixed}, dtype, 16, all, out);           // MHA, a dim without tensor cores
    run_paged(gpu, cpu, {2, 1, 576, 512, true, {{40, 1}, {0, 1}, {9, 1}}}, dtype, 64, all, out);  // synth MLA
    run_paged(gpu, cpu, {8, 1, 576, 512, true, {{20, 33}, {5, 1}}}, dtype, 16, all, out);         // latent with prefill
  }
  run_dense(gpu, cpu, 200, 200, 8, 8, 192, 128, out);  // MLA expanded prefill
  run_dense(gpu, cpu, 77, 300, 16, 4, 128, 128, out);  // chunk against a prefix, GQA
  run_dense(gpu, cpu, 130, 130, 2, 2, 192, 128, out);  // synth MLA prefill
  run_dense(gpu, cpu, 1, 50, 4, 2, 64, 64, out);       // one query row
  run_dense(gpu, cpu, 33, 60, 3, 1, 48, 40, out);      // odd dims (CUDA-core kernel)
}

bool comparator_catches_errors() {
  Tensor ref = random_f32({4, 64}), bad = ref.clone(), nan = ref.clone();
  float max_ref = 0;
  for (int64_t i = 0; i < ref.numel(); ++i) max_ref = std::max(max_ref, std::fabs(ref.data<float>()[i]));
  bad.data<float>()[77] += 1e-3f * max_ref;
  nan.data<float>()[5] = std::nanf("");
  return !compare("x", "", to_device(bad), ref, kF32Path).pass() &&
         !compare("x", "", to_device(nan), ref, kF32Path).pass() && compare("x", "", to_device(ref), ref, kExact).pass();
}

}  // namespace
}  // namespace mx

int main(int argc, char** argv) {
  uint64_t seed = std::random_device{}();
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--seed") == 0 && i + 1 < argc) {
      seed = std::strtoull(argv[++i], nullptr, 10);
    } else {
      std::fprintf(stderr, "usage: %s [--seed N]\n", argv[0]);
      return 2;
    }
  }
  mx::rng.seed(seed);
  try {
    MX_CUDA_CHECK(cudaStreamCreate(&mx::stream));
    if (!mx::comparator_catches_errors()) {
      std::printf("FAIL: the comparison does not catch a wrong element\n");
      return 1;
    }
    auto cpu = mx::make_cpu_ops(mx::ActivationMode::W4A16);
    mx::cuda::CudaAttention gpu(mx::stream, /*poison_outputs=*/true);
    std::vector<mx::Result> results;
    mx::run_all(gpu, *cpu, results);
    MX_CUDA_CHECK(cudaStreamSynchronize(mx::stream));
    int failed = 0;
    std::printf("seed %llu; GPU caches and outputs poisoned (0xFF) first; rel = max|gpu-cpu| / max|cpu|; "
                "store_kv: number of differing rows\n",
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
