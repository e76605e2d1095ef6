// Attention kernel benchmark of CudaAttention (docs/cuda-attention.md):
//   copy      device-to-device copy bandwidth (bytes read + written): the floor
//             decode attention is measured against;
//   prefill   causal attention TFLOP/s: a paged 8K-token prefill (Llama GQA,
//             32 q / 8 KV heads of 128, BF16 cache) and the dense MLA expanded
//             form (64 heads, q/k 192, v 128, F32 inputs) of 8K tokens, and
//             of one 2K chunk against a 6K cached prefix;
//   decode    GQA decode (32 q / 8 KV heads of 128) over BF16 and FP8 caches,
//             and MLA absorbed decode (64 heads over the 576-wide latent) on
//             the CUDA-core kernel, as bytes of cache read / time, and that
//             over the copy bandwidth.
// Inputs are random (never zeros); caches are far larger than the 60 MB L2
// except where noted. Each figure is the median of 7 timings of 10 back-to-back
// calls (CUDA events). Prints a markdown table last.
//   attention_bench [--kernel auto|generic|tensor-core] [--cases all|prefill|decode] [--tc-tiles 0-3]
// --cases prefill: the prefill rows alone, without the copy and decode rows;
// --tc-tiles N: N 64-row query tiles per block of the tensor-core kernel
// (0: its automatic choice; src/cuda/attention/tensor_core_tuning.h).
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "core/dtype.h"
#include "core/error.h"
#include "cuda/attention/tensor_core_tuning.h"
#include "cuda/backend/cuda_attention.h"
#include "cuda/backend/device_memory.h"
#include "cuda/cuda_check.h"

namespace mx {
namespace {

cudaStream_t stream = nullptr;
std::mt19937_64 rng(1234);

struct Row {
  std::string name, shape;
  double us = 0, rate = 0;
  std::string unit;
  double of_floor = 0;  // fraction of copy bandwidth (decode); 0 when not applicable
};

template <typename F>
double median_us(F&& call, int inner = 10, int outer = 7) {
  call();
  MX_CUDA_CHECK(cudaStreamSynchronize(stream));
  cudaEvent_t a, b;
  MX_CUDA_CHECK(cudaEventCreate(&a));
  MX_CUDA_CHECK(cudaEventCreate(&b));
  std::vector<double> times;
  for (int o = 0; o < outer; ++o) {
    MX_CUDA_CHECK(cudaEventRecord(a, stream));
    for (int i = 0; i < inner; ++i) call();
    MX_CUDA_CHECK(cudaEventRecord(b, stream));
    MX_CUDA_CHECK(cudaEventSynchronize(b));
    float ms = 0;
    MX_CUDA_CHECK(cudaEventElapsedTime(&ms, a, b));
    times.push_back(1e3 * ms / inner);
  }
  cudaEventDestroy(a);
  cudaEventDestroy(b);
  std::sort(times.begin(), times.end());
  return times[times.size() / 2];
}

// Fills a device tensor with random valid values of its dtype by tiling a
// 32 MiB host pattern (never zeros, no NaN).
void fill_random(const Tensor& t) {
  const size_t pattern_bytes = std::min<size_t>(t.nbytes(), size_t(32) << 20);
  std::vector<uint8_t> host(pattern_bytes);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  const size_t esz = dtype_size(t.dtype());
  for (size_t i = 0; i + esz <= pattern_bytes; i += esz) {
    const float x = dist(rng);
    if (t.dtype() == DType::BF16) {
      const uint16_t b = f32_to_bf16(x);
      std::memcpy(&host[i], &b, 2);
    } else if (t.dtype() == DType::F8E4M3) {
      host[i] = f32_to_fp8e4m3(x * 100.0f);
    } else {
      const float v = t.dtype() == DType::F32 ? x : 0.0f;
      std::memcpy(&host[i], &v, 4);
    }
  }
  for (size_t off = 0; off < t.nbytes(); off += pattern_bytes)
    MX_CUDA_CHECK(cudaMemcpy(t.raw() + off, host.data(), std::min(pattern_bytes, t.nbytes() - off),
                             cudaMemcpyHostToDevice));
}

void fill_scales(const Tensor& t) {
  if (!t.defined()) return;
  std::vector<float> host(size_t(t.numel()));
  std::uniform_real_distribution<float> dist(0.001f, 0.01f);
  for (float& x : host) x = dist(rng);
  MX_CUDA_CHECK(cudaMemcpy(t.raw(), host.data(), t.nbytes(), cudaMemcpyHostToDevice));
}

Tensor random_device(Shape shape) {
  Tensor t = cuda::device_empty(DType::F32, std::move(shape), stream);
  fill_random(t);
  return t;
}

double copy_bandwidth_gbs(std::vector<Row>& rows) {
  const size_t bytes = size_t(2) << 30;
  Tensor src = cuda::device_empty(DType::U8, {int64_t(bytes)}, stream), dst = cuda::device_empty(DType::U8, {int64_t(bytes)}, stream);
  MX_CUDA_CHECK(cudaMemsetAsync(src.raw(), 1, bytes, stream));
  const double us = median_us([&] { MX_CUDA_CHECK(cudaMemcpyAsync(dst.raw(), src.raw(), bytes, cudaMemcpyDeviceToDevice, stream)); }, 5, 7);
  const double gbs = 2.0 * double(bytes) / (us * 1e3);
  rows.push_back({"copy", "2 GiB device-to-device", us, gbs, "GB/s (read + write)", 1.0});
  return gbs;
}

// A paged cache holding `seqs` sequences of `ctx` tokens in scrambled blocks.
struct PagedSetup {
  KvLayerCache cache;
  AttentionMeta meta;
};

PagedSetup make_paged(cuda::CudaAttention& att, int64_t seqs, int64_t cached, int64_t fresh, int64_t kv_heads,
                      int64_t k_dim, int64_t v_dim, bool latent, DType dtype, int64_t bs) {
  const int64_t ctx = cached + fresh, per_seq = (ctx + bs - 1) / bs, blocks = seqs * per_seq;
  PagedSetup s;
  s.cache = att.allocate_kv(blocks, bs, kv_heads, k_dim, v_dim, latent, dtype);
  for (const Tensor* t : {&s.cache.k, &s.cache.v}) if (t->defined()) fill_random(*t);
  fill_scales(s.cache.k_scale);
  fill_scales(s.cache.v_scale);
  std::vector<int32_t> perm(static_cast<size_t>(blocks));
  for (size_t i = 0; i < perm.size(); ++i) perm[i] = int32_t(i);
  std::shuffle(perm.begin(), perm.end(), rng);
  s.meta.block_size = bs;
  for (int64_t q = 0; q < seqs; ++q) {
    AttentionSeq seq;
    seq.q_begin = q * fresh, seq.num_new = fresh, seq.num_cached = cached;
    seq.block_table.assign(perm.begin() + q * per_seq, perm.begin() + (q + 1) * per_seq);
    for (int64_t j = cached; j < ctx; ++j) s.meta.slots.push_back(int64_t(seq.block_table[size_t(j / bs)]) * bs + j % bs);
    s.meta.seqs.push_back(std::move(seq));
  }
  return s;
}

double causal_pairs(int64_t cached, int64_t fresh) {
  return double(fresh) * double(cached) + double(fresh) * double(fresh + 1) / 2.0;
}

void bench_prefill(cuda::CudaAttention& att, std::vector<Row>& rows) {
  {  // Llama-style paged prefill, 8K tokens.
    const int64_t n = 8192, qh = 32, kvh = 8, d = 128;
    PagedSetup s = make_paged(att, 1, 0, n, kvh, d, d, false, DType::BF16, 64);
    Tensor q = random_device({n, qh, d});
    att.begin_step();
    att.prepare(s.meta);
    const double us = median_us([&] { att.paged_attention(q, s.cache, s.meta, 0.088f); }, 3, 5);
    const double flops = 4.0 * qh * d * causal_pairs(0, n);
    rows.push_back({"prefill paged GQA", "8192 tok, 32q/8kv x128, bf16 cache", us, flops / (us * 1e6), "TFLOP/s", 0});
  }
  {  // Dense causal attention, same model shape, F32 inputs.
    const int64_t n = 8192, h = 32, d = 128;
    Tensor q = random_device({n, h, d}), k = random_device({n, h, d}), v = random_device({n, h, d});
    const double us = median_us([&] { att.attention(q, k, v, 0.088f); }, 3, 5);
    rows.push_back({"prefill dense", "8192 tok, 32 heads x128, f32 in", us, 4.0 * h * d * causal_pairs(0, n) / (us * 1e6),
                    "TFLOP/s", 0});
  }
  {  // MLA expanded prefill (Kimi-K2.5 / DeepSeek-V3 per-head dims, 64 heads).
    const int64_t n = 8192, h = 64, dk = 192, dv = 128;
    Tensor q = random_device({n, h, dk}), k = random_device({n, h, dk}), v = random_device({n, h, dv});
    const double us = median_us([&] { att.attention(q, k, v, 0.072f); }, 3, 5);
    const double flops = 2.0 * h * double(dk + dv) * causal_pairs(0, n);
    rows.push_back({"prefill MLA expanded", "8192 tok, 64 heads, qk192 v128, f32 in", us, flops / (us * 1e6), "TFLOP/s", 0});
  }
  {  // The same as one 2,048-token chunk of chunked prefill against 6,144 cached tokens.
    const int64_t fresh = 2048, cached = 6144, h = 64, dk = 192, dv = 128;
    Tensor q = random_device({fresh, h, dk}), k = random_device({cached + fresh, h, dk}),
           v = random_device({cached + fresh, h, dv});
    const double us = median_us([&] { att.attention(q, k, v, 0.072f); }, 3, 5);
    const double flops = 2.0 * h * double(dk + dv) * causal_pairs(cached, fresh);
    rows.push_back({"prefill MLA expanded, chunk", "2048 new + 6144 cached, 64 heads, qk192 v128, f32 in", us,
                    flops / (us * 1e6), "TFLOP/s", 0});
  }
}

void bench_decode(cuda::CudaAttention& att, double copy_gbs, std::vector<Row>& rows) {
  struct Case {
    int64_t batch, ctx;
    DType dtype;
    bool latent;
  };
  for (const Case& c : {Case{1, 32768, DType::BF16, false}, Case{16, 8192, DType::BF16, false},
                        Case{64, 4096, DType::BF16, false}, Case{64, 8192, DType::BF16, false},
                        Case{64, 8192, DType::F8E4M3, false}, Case{64, 8192, DType::BF16, true},
                        Case{64, 8192, DType::F8E4M3, true}}) {
    const int64_t qh = c.latent ? 64 : 32, kvh = c.latent ? 1 : 8, dk = c.latent ? 576 : 128, dv = c.latent ? 512 : 128;
    PagedSetup s = make_paged(att, c.batch, c.ctx - 1, 1, kvh, dk, dv, c.latent, c.dtype, 64);
    Tensor q = random_device({c.batch, qh, dk});
    att.begin_step();
    att.prepare(s.meta);
    const double us = median_us([&] { att.paged_attention(q, s.cache, s.meta, 0.088f); });
    const double esz = double(dtype_size(c.dtype)), scale_bytes = c.dtype == DType::F8E4M3 ? 4.0 : 0.0;
    const double per_token = c.latent ? dk * esz + scale_bytes : 2.0 * (kvh * dk * esz + scale_bytes);
    const double bytes = double(c.batch) * double(c.ctx) * per_token;
    const double gbs = bytes / (us * 1e3);
    rows.push_back({c.latent ? "decode MLA (auto: mla_decode)" : "decode GQA",
                    fmt::format("b{} ctx{} {} {}", c.batch, c.ctx, c.dtype == DType::BF16 ? "bf16" : "fp8",
                                c.latent ? "64q x 576/512" : "32q/8kv x128"),
                    us, gbs, "GB/s of KV", gbs / copy_gbs});
  }
}

}  // namespace
}  // namespace mx

int main(int argc, char** argv) {
  using namespace mx;
  cuda::AttentionKernel kernel = cuda::AttentionKernel::Auto;
  bool run_prefill = true, run_decode = true;
  int tc_tiles = 0;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--kernel") == 0 && i + 1 < argc) {
      kernel = cuda::parse_attention_kernel(argv[++i]);
    } else if (std::strcmp(argv[i], "--cases") == 0 && i + 1 < argc && std::strcmp(argv[i + 1], "prefill") == 0) {
      run_decode = false, ++i;
    } else if (std::strcmp(argv[i], "--cases") == 0 && i + 1 < argc && std::strcmp(argv[i + 1], "decode") == 0) {
      run_prefill = false, ++i;
    } else if (std::strcmp(argv[i], "--cases") == 0 && i + 1 < argc && std::strcmp(argv[i + 1], "all") == 0) {
      ++i;
    } else if (std::strcmp(argv[i], "--tc-tiles") == 0 && i + 1 < argc) {
      tc_tiles = std::atoi(argv[++i]);
    } else {
      std::fprintf(stderr, "usage: %s [--kernel auto|generic|tensor-core] [--cases all|prefill|decode] [--tc-tiles 0-3]\n",
                   argv[0]);
      return 2;
    }
  }
  try {
    MX_CUDA_CHECK(cudaStreamCreate(&stream));
    cudaDeviceProp prop{};
    MX_CUDA_CHECK(cudaGetDeviceProperties(&prop, 0));
    cuda::CudaAttention att(stream, false);
    att.set_kernel(kernel);
    cuda::set_tensor_core_tiles_per_block(tc_tiles);
    std::vector<Row> rows;
    if (run_prefill) bench_prefill(att, rows);
    if (run_decode) bench_decode(att, copy_bandwidth_gbs(rows), rows);
    std::printf("%s, %d SMs; median of 7 x 10 calls (prefill: 5 x 3); tensor-core query tiles per block: %s\n",
                prop.name, prop.multiProcessorCount, tc_tiles == 0 ? "auto" : std::to_string(tc_tiles).c_str());
    std::printf("| case | shape | time us | rate | unit | of copy bw |\n|---|---|---|---|---|---|\n");
    for (const Row& r : rows)
      std::printf("| %s | %s | %.1f | %.1f | %s | %s |\n", r.name.c_str(), r.shape.c_str(), r.us, r.rate, r.unit.c_str(),
                  r.of_floor > 0 ? fmt::format("{:.0f}%", 100 * r.of_floor).c_str() : "");
    return 0;
  } catch (const std::exception& e) {
    std::printf("FAIL: %s\n", e.what());
    return 1;
  }
}
