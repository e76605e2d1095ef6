// MLA absorbed-form decode attention: correctness check and benchmark of
// src/cuda/attention/mla_decode.h (docs/mla-decode.md). Run by
// bench/attention/mla_decode_check.sh on an H100/H200.
//
// 1. Correctness: fresh random q and cache (BF16, FP8 E4M3 with per-token
//    scales), scrambled block tables padded with a poison block, ragged context
//    lengths, NaN-poisoned output; compared with a CPU float64 reference of the
//    same dequantized values, with q rounded to BF16 as the kernel rounds it,
//    by ||out - ref|| / ||ref|| (threshold 1e-2: P is BF16 on the tensor
//    cores; the error against an F32-q reference is printed too), over several
//    head counts, block sizes, magnitude spreads and forced split counts.
// 2. Timing: device-to-device copy bandwidth (read + write), then batch x context
//    x dtype x heads, each as the median of CUDA-graph replays over rotating
//    block sets (so the 60 MB L2 does not serve the KV); table printed last.
//
// Usage: mla_decode_bench [--quick] [--check-only] [--target] [--ctx N]
//                         [--kernel auto|tiled|fused|wgmma] [--only HEADS,fp8|bf16,BATCH,CTX]
// --target times only issue 7's rows: FP8 with 8 heads at batch 64 x 8K on the
// wgmma and fused kernels (twice each), both at batch 1-128, the wgmma
// kernel's split sweep, block size 16, 32K context and P.V-less time, after
// the copy bandwidth.
// --kernel forces the kernel of every case it can run (the others stay on auto);
// without it the table also times the tiled kernel beside the fused one for
// FP8 at batch 64 (the comparison in docs/mla-decode.md).
#include <cuda_bf16.h>
#include <cuda_fp8.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "cuda/attention/mla_decode.h"

using mx::cuda::MlaDecodeArgs;
using mx::cuda::MlaDecodeKernel;
using mx::cuda::MlaDecodeShape;
using mx::cuda::MlaKvDtype;
constexpr int kD = mx::cuda::kMlaHeadDim;
constexpr int kV = mx::cuda::kMlaValueDim;

#define CK(call)                                                                                   \
  do {                                                                                             \
    cudaError_t e_ = (call);                                                                       \
    if (e_ != cudaSuccess) {                                                                       \
      std::fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #call, cudaGetErrorString(e_)); \
      std::exit(1);                                                                                \
    }                                                                                              \
  } while (0)

namespace {

int g_sms = 0;
MlaDecodeKernel g_kernel = MlaDecodeKernel::kAuto;  // --kernel

// The kernel a case runs: the forced one where it can run the shape, else auto.
MlaDecodeKernel kernel_for(int heads, MlaKvDtype dtype, MlaDecodeKernel want) {
  // The bench's "auto" times the tiled kernel in the main table and the fused
  // one beside it (the library's kAuto picks between them by batch).
  if (want == MlaDecodeKernel::kAuto) return MlaDecodeKernel::kTiled;
  if (want == MlaDecodeKernel::kFp8Fused && (dtype != MlaKvDtype::kFP8E4M3 || heads > 16))
    return MlaDecodeKernel::kAuto;
  if (want == MlaDecodeKernel::kFp8Wgmma && (dtype != MlaKvDtype::kFP8E4M3 || heads > 8)) return MlaDecodeKernel::kAuto;
  return want;
}
// The name of the kernel kernel_for() resolved (kAuto only where a forced FP8
// kernel cannot run the shape: the tiled one).
const char* kernel_name(int heads, MlaKvDtype dtype, MlaDecodeKernel k) {
  return k == MlaDecodeKernel::kFp8Fused ? "fused" : k == MlaDecodeKernel::kFp8Wgmma ? "wgmma" : "tiled";
}

template <typename T>
T* dev_alloc(size_t n) {
  T* p = nullptr;
  CK(cudaMalloc(&p, std::max<size_t>(n, 1) * sizeof(T)));
  return p;
}
template <typename T>
T* dev_upload(const std::vector<T>& v) {
  T* p = dev_alloc<T>(v.size());
  CK(cudaMemcpy(p, v.data(), v.size() * sizeof(T), cudaMemcpyHostToDevice));
  return p;
}

// ---------------------------------------------------------------- correctness

struct CheckCase {
  int heads, batch, block_size, max_ctx, splits;
  MlaKvDtype dtype;
  float decades = 0;  // > 0: token magnitudes log-uniform over 10^[-decades, decades]
};

// Builds a random cache with `blocks` blocks; `deq` receives the values the
// kernel must see (BF16-rounded or fp8 * scale). Block 0 is a poison block of
// huge values that only padding table entries point to.
struct HostCache {
  std::vector<uint16_t> bf16;
  std::vector<uint8_t> fp8;
  std::vector<float> scale;
  std::vector<float> deq;
};

HostCache make_cache(std::mt19937& rng, int blocks, int bs, MlaKvDtype dtype, float decades) {
  HostCache c;
  const size_t rows = size_t(blocks) * bs;
  c.deq.resize(rows * kD);
  if (dtype == MlaKvDtype::kBF16) c.bf16.resize(rows * kD);
  else c.fp8.resize(rows * kD), c.scale.resize(rows);
  std::uniform_real_distribution<float> u(-1.f, 1.f), amp(0.2f, 3.f), expo(-decades, decades);
  std::vector<float> x(kD);
  for (size_t r = 0; r < rows; ++r) {
    const bool poison = r < size_t(bs);
    const float a = poison ? 1e4f : decades > 0 ? std::pow(10.f, expo(rng)) : amp(rng);
    float amax = 0.f;
    for (int i = 0; i < kD; ++i) x[i] = poison ? a : a * u(rng), amax = std::max(amax, std::fabs(x[i]));
    if (dtype == MlaKvDtype::kBF16) {
      for (int i = 0; i < kD; ++i) {
        __nv_bfloat16 h = __float2bfloat16_rn(x[i]);
        std::memcpy(&c.bf16[r * kD + i], &h, 2);
        c.deq[r * kD + i] = __bfloat162float(h);
      }
    } else {
      const float s = amax > 0.f ? amax / 448.f : 1.f;
      c.scale[r] = s;
      for (int i = 0; i < kD; ++i) {
        __nv_fp8_e4m3 f(x[i] / s);
        c.fp8[r * kD + i] = f.__x;
        c.deq[r * kD + i] = float(f) * s;
      }
    }
  }
  return c;
}

bool run_check(std::mt19937& rng, const CheckCase& cc, MlaDecodeKernel want) {
  const int max_blocks = (cc.max_ctx + cc.block_size - 1) / cc.block_size;
  std::uniform_int_distribution<int> len_dist(1, cc.max_ctx);
  std::vector<int32_t> ctx(cc.batch);
  for (int b = 0; b < cc.batch; ++b) ctx[b] = b == 0 ? cc.max_ctx : len_dist(rng);
  int used = 0;
  for (int b = 0; b < cc.batch; ++b) used += (ctx[b] + cc.block_size - 1) / cc.block_size;
  const int blocks = used + 1 + 3;  // poison block 0, a few never referenced
  HostCache cache = make_cache(rng, blocks, cc.block_size, cc.dtype, cc.decades);
  std::vector<int32_t> perm(blocks - 1);
  std::iota(perm.begin(), perm.end(), 1);
  std::shuffle(perm.begin(), perm.end(), rng);
  std::vector<int32_t> table(size_t(cc.batch) * max_blocks, 0);  // padding -> poison block 0
  int next = 0;
  for (int b = 0; b < cc.batch; ++b)
    for (int i = 0; i < (ctx[b] + cc.block_size - 1) / cc.block_size; ++i) table[size_t(b) * max_blocks + i] = perm[next++];
  std::vector<float> q(size_t(cc.batch) * cc.heads * kD);
  std::normal_distribution<float> n01(0.f, 1.f);
  for (auto& v : q) v = n01(rng);
  const float scale = 1.f / std::sqrt(192.f);

  MlaDecodeShape shape{cc.batch, cc.heads, max_blocks, cc.block_size, cc.dtype};
  const MlaDecodeKernel kernel = kernel_for(cc.heads, cc.dtype, want);
  const int splits = cc.splits > 0 ? cc.splits : mx::cuda::mla_decode_default_splits(shape, g_sms, kernel);
  float* d_q = dev_upload(q);
  void* d_k = cc.dtype == MlaKvDtype::kBF16 ? static_cast<void*>(dev_upload(cache.bf16)) : static_cast<void*>(dev_upload(cache.fp8));
  float* d_s = cc.dtype == MlaKvDtype::kFP8E4M3 ? dev_upload(cache.scale) : nullptr;
  int32_t* d_t = dev_upload(table);
  int32_t* d_c = dev_upload(ctx);
  const size_t out_n = size_t(cc.batch) * cc.heads * kV;
  float* d_o = dev_alloc<float>(out_n);
  CK(cudaMemset(d_o, 0xff, out_n * sizeof(float)));  // NaN poison
  const size_t ws_bytes = mx::cuda::mla_decode_workspace_bytes(shape, splits, g_sms);
  void* d_ws = ws_bytes ? dev_alloc<uint8_t>(ws_bytes) : nullptr;
  if (ws_bytes) CK(cudaMemset(d_ws, 0xff, ws_bytes));
  MlaDecodeArgs a;
  a.shape = shape, a.q = d_q, a.k_cache = d_k, a.k_scale = d_s, a.block_tables = d_t, a.context_lens = d_c;
  a.softmax_scale = scale, a.out = d_o, a.workspace = d_ws, a.num_splits = splits, a.kernel = kernel;
  CK(mx::cuda::mla_decode(a, g_sms, nullptr));
  CK(cudaDeviceSynchronize());
  std::vector<float> out(out_n);
  CK(cudaMemcpy(out.data(), d_o, out_n * sizeof(float), cudaMemcpyDeviceToHost));

  // Two references in float64 over the same dequantized cache: q as given
  // (reported), and q rounded as the kernel rounds it, BF16(q * scale * log2 e)
  // with the softmax in base 2 (gating: what is left is the kernel's own error,
  // BF16 probabilities and F32 accumulation).
  const float q_scale = scale * 1.4426950408889634f;
  auto reference = [&](int b, int h, bool round_q, std::vector<double>& o) {
    std::vector<double> qv(kD);
    for (int i = 0; i < kD; ++i) {
      const float x = q[(size_t(b) * cc.heads + h) * kD + i];
      qv[i] = round_q ? double(__bfloat162float(__float2bfloat16_rn(x * q_scale))) : double(x) * scale * 1.4426950408889634;
    }
    std::vector<double> sc(ctx[b]);
    double mx = -1e300;
    for (int t = 0; t < ctx[b]; ++t) {
      const int blk = table[size_t(b) * max_blocks + t / cc.block_size];
      const float* kr = &cache.deq[(size_t(blk) * cc.block_size + t % cc.block_size) * kD];
      double d = 0;
      for (int i = 0; i < kD; ++i) d += qv[i] * kr[i];
      sc[t] = d;  // log2 units
      mx = std::max(mx, d);
    }
    double sum = 0;
    o.assign(kV, 0.0);
    for (int t = 0; t < ctx[b]; ++t) {
      const double p = std::exp2(sc[t] - mx);
      sum += p;
      const int blk = table[size_t(b) * max_blocks + t / cc.block_size];
      const float* kr = &cache.deq[(size_t(blk) * cc.block_size + t % cc.block_size) * kD];
      for (int i = 0; i < kV; ++i) o[i] += p * kr[i];
    }
    for (auto& v : o) v /= sum;
  };
  double err2 = 0, ref2 = 0, err2_exact = 0, ref2_exact = 0;
  size_t bad = 0;
  std::vector<double> r_round, r_exact;
  for (int b = 0; b < cc.batch; ++b)
    for (int h = 0; h < cc.heads; ++h) {
      reference(b, h, true, r_round);
      reference(b, h, false, r_exact);
      const float* ov = &out[(size_t(b) * cc.heads + h) * kV];
      for (int i = 0; i < kV; ++i) {
        if (!std::isfinite(ov[i])) ++bad;
        err2 += (ov[i] - r_round[i]) * (ov[i] - r_round[i]);
        ref2 += r_round[i] * r_round[i];
        err2_exact += (ov[i] - r_exact[i]) * (ov[i] - r_exact[i]);
        ref2_exact += r_exact[i] * r_exact[i];
      }
    }
  const double rel_exact = std::sqrt(err2_exact / std::max(ref2_exact, 1e-300));
  const double rel = std::sqrt(err2 / std::max(ref2, 1e-300));
  const bool ok = bad == 0 && rel < 1e-2;
  std::printf("check %-5s %-4s heads %3d batch %2d block %2d max_ctx %5d splits %3d decades %.0f: rel_err %.2e (vs F32 q: %.2e) non_finite %zu %s\n",
              kernel_name(cc.heads, cc.dtype, kernel), cc.dtype == MlaKvDtype::kBF16 ? "bf16" : "fp8", cc.heads, cc.batch,
              cc.block_size, cc.max_ctx, splits,
              cc.decades, rel, rel_exact, bad, ok ? "ok" : "FAIL");
  for (void* p : {static_cast<void*>(d_q), d_k, static_cast<void*>(d_s), static_cast<void*>(d_t), static_cast<void*>(d_c),
                  static_cast<void*>(d_o), d_ws})
    if (p) CK(cudaFree(p));
  return ok;
}

// ---------------------------------------------------------------- timing

// Non-zero pseudo-random cache contents (no FP8 NaN codes), filled on the GPU.
__global__ void fill_bf16(uint16_t* p, size_t n, uint32_t seed) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x) {
    uint32_t h = uint32_t(i) * 2654435761u ^ seed;
    h ^= h >> 15, h *= 2246822519u, h ^= h >> 13;
    const float v = (float(h & 0xffff) / 65535.f - 0.5f) * 4.f;
    __nv_bfloat16 b = __float2bfloat16_rn(v);
    p[i] = *reinterpret_cast<uint16_t*>(&b);
  }
}
__global__ void fill_fp8(uint8_t* p, size_t n, uint32_t seed) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x) {
    uint32_t h = uint32_t(i) * 2654435761u ^ seed;
    h ^= h >> 15, h *= 2246822519u, h ^= h >> 13;
    uint8_t v = uint8_t(h);
    if ((v & 0x7f) == 0x7f) v &= 0xfe;  // 0x7f/0xff are NaN in E4M3
    p[i] = v;
  }
}
__global__ void fill_f32(float* p, size_t n, uint32_t seed, float lo, float hi) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x) {
    uint32_t h = uint32_t(i) * 2654435761u ^ seed;
    h ^= h >> 15, h *= 2246822519u, h ^= h >> 13;
    p[i] = lo + (hi - lo) * float(h & 0xffffff) / 16777215.f;
  }
}

struct Pool {
  uint16_t* bf16 = nullptr;
  uint8_t* fp8 = nullptr;
  float* scale = nullptr;
  size_t tokens = 0;
};

double measure_copy_gbs() {
  const size_t bytes = size_t(2) << 30;
  uint8_t* a = dev_alloc<uint8_t>(bytes);
  uint8_t* b = dev_alloc<uint8_t>(bytes);
  CK(cudaMemset(a, 1, bytes));
  cudaEvent_t e0, e1;
  CK(cudaEventCreate(&e0));
  CK(cudaEventCreate(&e1));
  std::vector<float> ms;
  for (int i = 0; i < 8; ++i) {
    CK(cudaEventRecord(e0));
    CK(cudaMemcpyAsync(b, a, bytes, cudaMemcpyDeviceToDevice));
    CK(cudaEventRecord(e1));
    CK(cudaEventSynchronize(e1));
    float t;
    CK(cudaEventElapsedTime(&t, e0, e1));
    if (i > 0) ms.push_back(t);
  }
  std::sort(ms.begin(), ms.end());
  CK(cudaFree(a));
  CK(cudaFree(b));
  return 2.0 * bytes / (ms[ms.size() / 2] * 1e-3) / 1e9;
}

struct Result {
  int heads, batch, ctx, block_size, splits, skip;
  MlaKvDtype dtype;
  const char* kernel;
  double us, gbs, frac_copy, tflops, floor_us;
};

Result time_case(const Pool& pool, double copy_gbs, int heads, int batch, int ctx, MlaKvDtype dtype, int bs,
                 int skip = 0, MlaDecodeKernel want = g_kernel, int force_splits = 0) {
  const MlaDecodeKernel kernel = kernel_for(heads, dtype, want);
  const bool fp8 = dtype == MlaKvDtype::kFP8E4M3;
  const int max_blocks = (ctx + bs - 1) / bs;
  const size_t need_blocks = size_t(batch) * max_blocks;
  const size_t pool_blocks = pool.tokens / bs;
  const double kv_row = fp8 ? kD + 4.0 : 2.0 * kD;
  const double kv_bytes = double(batch) * ctx * kv_row;
  // Enough disjoint block sets to rotate over >= 512 MB (the L2 is 60 MB).
  const int sets = int(std::clamp<double>(std::ceil(512e6 / kv_bytes), 1.0, std::min<double>(16.0, double(pool_blocks / need_blocks))));
  std::mt19937 rng(uint32_t(heads * 7919 + batch * 131 + ctx + bs));
  std::vector<int32_t> perm(pool_blocks);
  std::iota(perm.begin(), perm.end(), 0);
  std::shuffle(perm.begin(), perm.end(), rng);
  std::vector<int32_t> tables(sets * need_blocks);
  for (size_t i = 0; i < tables.size(); ++i) tables[i] = perm[i];
  int32_t* d_tables = dev_upload(tables);
  int32_t* d_ctx = dev_upload(std::vector<int32_t>(batch, ctx));
  const size_t q_n = size_t(batch) * heads * kD;
  float* d_q = dev_alloc<float>(q_n * sets);
  fill_f32<<<1024, 256>>>(d_q, q_n * sets, 77u + heads, -2.f, 2.f);
  CK(cudaGetLastError());
  float* d_o = dev_alloc<float>(size_t(batch) * heads * kV);
  MlaDecodeShape shape{batch, heads, max_blocks, bs, dtype};
  const int splits = force_splits > 0 ? force_splits : mx::cuda::mla_decode_default_splits(shape, g_sms, kernel);
  const size_t ws_bytes = mx::cuda::mla_decode_workspace_bytes(shape, splits, g_sms);
  void* d_ws = ws_bytes ? dev_alloc<uint8_t>(ws_bytes) : nullptr;
  auto args_for = [&](int set) {
    MlaDecodeArgs a;
    a.shape = shape;
    a.q = d_q + q_n * set;
    a.k_cache = fp8 ? static_cast<const void*>(pool.fp8) : static_cast<const void*>(pool.bf16);
    a.k_scale = fp8 ? pool.scale : nullptr;
    a.block_tables = d_tables + need_blocks * set;
    a.context_lens = d_ctx;
    a.softmax_scale = 1.f / std::sqrt(192.f);
    a.out = d_o, a.workspace = d_ws, a.num_splits = splits;
    a.profile_skip = skip;
    a.kernel = kernel;
    return a;
  };
  cudaStream_t stream;
  CK(cudaStreamCreate(&stream));
  cudaEvent_t e0, e1;
  CK(cudaEventCreate(&e0));
  CK(cudaEventCreate(&e1));
  // Estimate one launch, then size a graph to ~4 ms of work.
  for (int i = 0; i < 2; ++i) CK(mx::cuda::mla_decode(args_for(i % sets), g_sms, stream));
  CK(cudaEventRecord(e0, stream));
  CK(mx::cuda::mla_decode(args_for(0), g_sms, stream));
  CK(cudaEventRecord(e1, stream));
  CK(cudaEventSynchronize(e1));
  float est_ms;
  CK(cudaEventElapsedTime(&est_ms, e0, e1));
  const int iters = std::clamp(int(4.0 / std::max(est_ms, 1e-3f)), 4, 400);
  cudaGraph_t graph;
  cudaGraphExec_t exec;
  CK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeGlobal));
  for (int i = 0; i < iters; ++i) CK(mx::cuda::mla_decode(args_for(i % sets), g_sms, stream));
  CK(cudaStreamEndCapture(stream, &graph));
  CK(cudaGraphInstantiate(&exec, graph, 0));
  CK(cudaGraphLaunch(exec, stream));
  std::vector<float> ms;
  for (int r = 0; r < 5; ++r) {
    CK(cudaEventRecord(e0, stream));
    CK(cudaGraphLaunch(exec, stream));
    CK(cudaEventRecord(e1, stream));
    CK(cudaEventSynchronize(e1));
    float t;
    CK(cudaEventElapsedTime(&t, e0, e1));
    ms.push_back(t / iters);
  }
  std::sort(ms.begin(), ms.end());
  const double us = ms[ms.size() / 2] * 1e3;
  const double flops = double(batch) * ctx * heads * 2.0 * (kD + kV);
  Result r{heads, batch, ctx, bs, splits, skip, dtype, kernel_name(heads, dtype, kernel), us, 0, 0, 0, 0};
  r.gbs = kv_bytes / (us * 1e-6) / 1e9;
  r.frac_copy = r.gbs / copy_gbs;
  r.tflops = flops / (us * 1e-6) / 1e12;
  r.floor_us = std::max(kv_bytes / (copy_gbs * 1e9), flops / 660e12) * 1e6;
  CK(cudaGraphExecDestroy(exec));
  CK(cudaGraphDestroy(graph));
  CK(cudaEventDestroy(e0));
  CK(cudaEventDestroy(e1));
  CK(cudaStreamDestroy(stream));
  for (void* p : {static_cast<void*>(d_tables), static_cast<void*>(d_ctx), static_cast<void*>(d_q), static_cast<void*>(d_o), d_ws})
    if (p) CK(cudaFree(p));
  return r;
}

void print_row(const Result& r) {
  std::printf("| %3d | %4s | %5s | %3d | %6d | %2d | %4d | %9.1f | %7.0f | %5.1f%% | %6.1f | %9.1f | %5.1f%% |\n", r.heads,
              r.dtype == MlaKvDtype::kBF16 ? "bf16" : "fp8", r.kernel, r.batch, r.ctx, r.block_size, r.splits, r.us, r.gbs,
              100 * r.frac_copy, r.tflops, r.floor_us, 100 * r.floor_us / r.us);
}

}  // namespace

int main(int argc, char** argv) {
  bool quick = false, check_only = false, target = false;
  // --only HEADS,fp8|bf16,BATCH,CTX: time that one case and nothing else (for a
  // profiler such as ncu, which then sees only its launches).
  int only_heads = 0, only_batch = 0, only_ctx = 0, one_ctx = 0;
  char only_kv[8] = {0};
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--quick")) quick = true;
    else if (!std::strcmp(argv[i], "--ctx") && i + 1 < argc && (one_ctx = std::atoi(argv[++i])) > 0 && one_ctx <= 32768) {
    } else if (!std::strcmp(argv[i], "--kernel") && i + 1 < argc) {
      const char* k = argv[++i];
      if (!std::strcmp(k, "auto")) g_kernel = MlaDecodeKernel::kAuto;
      else if (!std::strcmp(k, "tiled")) g_kernel = MlaDecodeKernel::kTiled;
      else if (!std::strcmp(k, "fused")) g_kernel = MlaDecodeKernel::kFp8Fused;
      else if (!std::strcmp(k, "wgmma")) g_kernel = MlaDecodeKernel::kFp8Wgmma;
      else return std::fprintf(stderr, "--kernel takes auto, tiled, fused or wgmma\n"), 2;
    }
    else if (!std::strcmp(argv[i], "--check-only")) check_only = true;
    else if (!std::strcmp(argv[i], "--target")) target = true;
    else if (!std::strcmp(argv[i], "--only") && i + 1 < argc &&
             std::sscanf(argv[++i], "%d,%7[a-z0-9],%d,%d", &only_heads, only_kv, &only_batch, &only_ctx) == 4 &&
             only_heads > 0 && only_batch > 0 && only_ctx > 0 && only_batch * size_t(only_ctx) <= size_t(128) * 32768 &&
             (!std::strcmp(only_kv, "fp8") || !std::strcmp(only_kv, "bf16"))) {
    } else {
      return std::fprintf(stderr,
                          "usage: %s [--quick] [--check-only] [--target] [--ctx N] [--kernel auto|tiled|fused|wgmma] [--only "
                          "HEADS,fp8|bf16,BATCH,CTX]\n",
                          argv[0]),
             2;
    }
  }
  cudaDeviceProp prop;
  CK(cudaGetDeviceProperties(&prop, 0));
  g_sms = prop.multiProcessorCount;
  std::printf("device: %s, %d SMs, L2 %d MB\n", prop.name, g_sms, prop.l2CacheSize >> 20);

  std::mt19937 rng(std::random_device{}());
  const std::vector<CheckCase> cases = {
      {8, 4, 64, 700, 0, MlaKvDtype::kBF16},     {8, 4, 64, 700, 0, MlaKvDtype::kFP8E4M3},
      {8, 3, 16, 1000, 0, MlaKvDtype::kFP8E4M3}, {8, 3, 16, 1000, 1, MlaKvDtype::kBF16},
      {16, 3, 64, 1500, 0, MlaKvDtype::kFP8E4M3}, {16, 3, 16, 1500, 5, MlaKvDtype::kBF16},
      {32, 2, 64, 900, 0, MlaKvDtype::kBF16},    {32, 2, 16, 900, 3, MlaKvDtype::kFP8E4M3},
      {64, 3, 64, 1100, 0, MlaKvDtype::kBF16},   {64, 3, 64, 1100, 0, MlaKvDtype::kFP8E4M3},
      {64, 2, 16, 800, 1, MlaKvDtype::kFP8E4M3}, {64, 2, 48, 600, 7, MlaKvDtype::kBF16},
      {128, 2, 64, 500, 0, MlaKvDtype::kFP8E4M3}, {128, 2, 16, 300, 2, MlaKvDtype::kBF16},
      {24, 2, 64, 333, 0, MlaKvDtype::kFP8E4M3}, {1, 2, 32, 65, 0, MlaKvDtype::kBF16},
      {8, 5, 64, 1, 0, MlaKvDtype::kFP8E4M3},    {16, 2, 64, 64, 40, MlaKvDtype::kFP8E4M3},
      {8, 3, 64, 900, 0, MlaKvDtype::kFP8E4M3, 3}, {64, 2, 16, 700, 0, MlaKvDtype::kFP8E4M3, 3},
      {16, 3, 64, 500, 3, MlaKvDtype::kFP8E4M3, 2}, {32, 2, 64, 400, 0, MlaKvDtype::kBF16, 2},
      {12, 3, 48, 777, 0, MlaKvDtype::kFP8E4M3},  {1, 3, 16, 300, 0, MlaKvDtype::kFP8E4M3},
      // More FP8 cases of <= 8 heads (the wgmma kernel): long contexts over
      // many tiles and splits, odd head counts, wide magnitudes.
      {8, 2, 16, 5000, 0, MlaKvDtype::kFP8E4M3},  {4, 3, 64, 2000, 3, MlaKvDtype::kFP8E4M3},
      {8, 2, 48, 3000, 1, MlaKvDtype::kFP8E4M3, 2}, {2, 3, 64, 129, 0, MlaKvDtype::kFP8E4M3},
      {8, 9, 16, 1500, 0, MlaKvDtype::kFP8E4M3, 3}, {5, 2, 64, 4100, 0, MlaKvDtype::kFP8E4M3, 1},
  };
  // Without --kernel, every case the fused FP8 kernel (<= 16 heads) can run
  // runs on both the tiled and the fused kernel.
  int failed = 0, checked = 0;
  if (only_heads == 0 && !target)
    for (const auto& c : cases) {
      failed += run_check(rng, c, g_kernel) ? 0 : 1, ++checked;
      if (g_kernel == MlaDecodeKernel::kAuto && c.dtype == MlaKvDtype::kFP8E4M3 && c.heads <= 16)
        failed += run_check(rng, c, MlaDecodeKernel::kFp8Fused) ? 0 : 1, ++checked;
      if (g_kernel == MlaDecodeKernel::kAuto && c.dtype == MlaKvDtype::kFP8E4M3 && c.heads <= 8)
        failed += run_check(rng, c, MlaDecodeKernel::kFp8Wgmma) ? 0 : 1, ++checked;
    }
  if (only_heads == 0 && !target) std::printf("correctness: %d cases, %d failed\n", checked, failed);
  if (check_only) return failed ? 1 : 0;

  const double copy_gbs = measure_copy_gbs();
  std::printf("copy bandwidth (D2D, read + write): %.0f GB/s\n", copy_gbs);
  Pool pool;
  pool.tokens = size_t(128) * 32768;
  pool.bf16 = dev_alloc<uint16_t>(pool.tokens * kD);
  pool.fp8 = dev_alloc<uint8_t>(pool.tokens * kD);
  pool.scale = dev_alloc<float>(pool.tokens);
  fill_bf16<<<4096, 256>>>(pool.bf16, pool.tokens * kD, 1u);
  fill_fp8<<<4096, 256>>>(pool.fp8, pool.tokens * kD, 2u);
  fill_f32<<<1024, 256>>>(pool.scale, pool.tokens, 3u, 0.002f, 0.02f);
  CK(cudaGetLastError());
  CK(cudaDeviceSynchronize());

  if (only_heads > 0) {
    const MlaKvDtype dt = !std::strcmp(only_kv, "fp8") ? MlaKvDtype::kFP8E4M3 : MlaKvDtype::kBF16;
    print_row(time_case(pool, copy_gbs, only_heads, only_batch, only_ctx, dt, 64));
    return 0;
  }
  std::vector<Result> results;
  if (target) {
    using K = MlaDecodeKernel;
    const auto fp8 = MlaKvDtype::kFP8E4M3;
    // Issue 7's row first (8 heads, batch 64 x 8K): the wgmma kernel beside
    // the fused one, each timed twice (the spread of one version).
    for (int rep = 0; rep < 2; ++rep)
      for (K k : {K::kFp8Wgmma, K::kFp8Fused}) results.push_back(time_case(pool, copy_gbs, 8, 64, 8192, fp8, 64, 0, k));
    for (int b : {1, 8, 32, 128}) results.push_back(time_case(pool, copy_gbs, 8, b, 8192, fp8, 64, 0, K::kFp8Wgmma));
    for (int b : {1, 8, 32, 128}) results.push_back(time_case(pool, copy_gbs, 8, b, 8192, fp8, 64, 0, K::kFp8Fused));
    for (int splits : {2, 3, 6, 8}) results.push_back(time_case(pool, copy_gbs, 8, 64, 8192, fp8, 64, 0, K::kFp8Wgmma, splits));
    results.push_back(time_case(pool, copy_gbs, 8, 64, 8192, fp8, 16, 0, K::kFp8Wgmma));
    results.push_back(time_case(pool, copy_gbs, 8, 64, 32768, fp8, 64, 0, K::kFp8Wgmma));
    results.push_back(time_case(pool, copy_gbs, 8, 64, 32768, fp8, 64, 0, K::kFp8Fused));
    const Result skip = time_case(pool, copy_gbs, 8, 64, 8192, fp8, 64, mx::cuda::kMlaSkipValues, K::kFp8Wgmma);
    std::printf("\nMLA decode, %s, copy bandwidth %.0f GB/s (targets: FP8 at batch 64 x 8K)\n", prop.name, copy_gbs);
    std::printf("| heads | kv | kernel | batch | ctx | block | splits | us | KV GB/s | of copy | TFLOP/s | floor us | floor/time |\n");
    std::printf("|---|---|---|---|---|---|---|---|---|---|---|---|---|\n");
    for (const auto& r : results) print_row(r);
    std::printf("wgmma, 8 heads, batch 64 x 8K without P.V (results wrong, time only): %.1f us\n", skip.us);
    return 0;
  }
  const std::vector<int> batches = quick ? std::vector<int>{1, 64} : std::vector<int>{1, 8, 32, 64, 128};
  const std::vector<int> ctxs = one_ctx ? std::vector<int>{one_ctx}
                                : quick ? std::vector<int>{8192}
                                        : std::vector<int>{1024, 4096, 8192, 16384, 32768};
  for (int heads : {8, 64})
    for (MlaKvDtype dt : {MlaKvDtype::kFP8E4M3, MlaKvDtype::kBF16})
      for (int b : batches)
        for (int c : ctxs) results.push_back(time_case(pool, copy_gbs, heads, b, c, dt, 64));
  for (int heads : {16, 32, 128})
    for (MlaKvDtype dt : {MlaKvDtype::kFP8E4M3, MlaKvDtype::kBF16})
      results.push_back(time_case(pool, copy_gbs, heads, 64, 8192, dt, 64));
  for (int heads : {8, 16, 64}) results.push_back(time_case(pool, copy_gbs, heads, 64, 8192, MlaKvDtype::kFP8E4M3, 16));
  if (g_kernel == MlaDecodeKernel::kAuto) {  // the fused FP8 kernel beside the tiled one, and its split choice
    for (int heads : {8, 16})
      for (int b : {1, 8, 32, 64, 128})
        results.push_back(time_case(pool, copy_gbs, heads, b, 8192, MlaKvDtype::kFP8E4M3, 64, 0, MlaDecodeKernel::kFp8Fused));
    results.push_back(time_case(pool, copy_gbs, 8, 64, 8192, MlaKvDtype::kFP8E4M3, 16, 0, MlaDecodeKernel::kFp8Fused));
    for (int heads : {8, 16})
      for (int splits : {2, 3, 4, 6, 8})
        results.push_back(
            time_case(pool, copy_gbs, heads, 64, 8192, MlaKvDtype::kFP8E4M3, 64, 0, MlaDecodeKernel::kFp8Fused, splits));
  }

  // Stage timing: the same launches with a stage left out (results wrong). The
  // fused kernel decodes inside its products, so it can leave out only P.V.
  std::vector<Result> stages;
  for (int heads : {8, 64}) {
    const bool fused = !std::strcmp(kernel_name(heads, MlaKvDtype::kFP8E4M3, kernel_for(heads, MlaKvDtype::kFP8E4M3, g_kernel)), "fused");
    for (int skip : {0, mx::cuda::kMlaSkipFp8Decode, mx::cuda::kMlaSkipValues,
                     mx::cuda::kMlaSkipFp8Decode | mx::cuda::kMlaSkipValues})
      if (!fused || !(skip & mx::cuda::kMlaSkipFp8Decode))
        stages.push_back(time_case(pool, copy_gbs, heads, 64, 8192, MlaKvDtype::kFP8E4M3, 64, skip));
  }
  if (g_kernel == MlaDecodeKernel::kAuto)
    for (int skip : {0, mx::cuda::kMlaSkipValues})
      stages.push_back(time_case(pool, copy_gbs, 8, 64, 8192, MlaKvDtype::kFP8E4M3, 64, skip, MlaDecodeKernel::kFp8Fused));
  for (int heads : {8, 64})
    for (int skip : {0, mx::cuda::kMlaSkipValues})
      stages.push_back(time_case(pool, copy_gbs, heads, 64, 8192, MlaKvDtype::kBF16, 64, skip));
  std::printf("\nstage timing, batch 64, ctx 8192 (a stage left out: results wrong, time only)\n");
  std::printf("| heads | kv | kernel | left out | us |\n|---|---|---|---|---|\n");
  for (const auto& r : stages)
    std::printf("| %d | %s | %s | %s | %.1f |\n", r.heads, r.dtype == MlaKvDtype::kBF16 ? "bf16" : "fp8", r.kernel,
                r.skip == 0 ? "nothing" : r.skip == 1 ? "fp8 decode" : r.skip == 2 ? "P.V" : "decode + P.V", r.us);

  std::printf("\nMLA decode, %s, copy bandwidth %.0f GB/s; floor = max(KV bytes / copy bw, FLOPs / 660 TFLOP/s)\n",
              prop.name, copy_gbs);
  std::printf("| heads | kv | kernel | batch | ctx | block | splits | us | KV GB/s | of copy | TFLOP/s | floor us | floor/time |\n");
  std::printf("|---|---|---|---|---|---|---|---|---|---|---|---|---|\n");
  for (const auto& r : results) print_row(r);
  std::printf("correctness: %d cases, %d failed\n", checked, failed);
  return failed ? 1 : 0;
}
