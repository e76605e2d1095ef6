// The mxfp4_bench --profile runs (see mxfp4_bench.cu's usage): a few launches
// of chosen kernels and nothing else, for a profiler such as ncu to pick out.
#include "profile_runs.h"

#include <cstdio>
#include <string>
#include <vector>

#include "cuda/device_info.h"
#include "cuda/mxfp4_gemm_ws.h"
#include "cuda/mxfp4_kernels.h"
#include "device_buffer.h"
#include "moe_weights.h"
#include "reference_kernels.cuh"

namespace mxbench {

using namespace mx::cuda;

namespace {

struct ProfileShape {
  const char* name;
  int N, K;
};

// A profiled launch's settings: a kernel number alone, or a whole GemmConfig.
GemmConfig as_config(int kernel) {
  GemmConfig c;
  c.kernel = kernel;
  return c;
}
GemmConfig as_config(const GemmConfig& c) { return c; }

// For the --profile runs: a random weight of `sh` in the kernel layout (codes
// uniform, scale bytes in [118, 123]) and, at each M, fresh activations and
// two launches of each of kernels(M), for a profiler to pick out.
template <class Kernels>
void profile_gemm(const ProfileShape& sh, std::initializer_list<int> Ms, Kernels kernels, cudaStream_t s,
                  SeedFn next_seed) {
  const int N = sh.N, K = sh.K;
  DeviceBuffer<uint8_t> c(size_t(N) * K / 2), sc(size_t(N) * K / 32), pc(c.n), ps(sc.n);
  fill_random_bytes(c.p, c.n, next_seed(), s);
  fill_random_scales(sc.p, sc.n, next_seed(), 118, 123, s);
  pack_mxfp4_device(c.p, sc.p, N, K, nullptr, pc.p, ps.p, s);
  Mxfp4DeviceWeight w;
  w.codes = pc.p;
  w.scales = ps.p;
  w.rows = N;
  w.cols = K;
  for (int M : Ms) {
    DeviceBuffer<uint16_t> x(size_t(M) * K), y(size_t(M) * N);
    fill_random_bf16(x.p, x.n, next_seed(), 1.0f, s);
    for (const auto& k : kernels(M)) {
      const GemmConfig cfg = as_config(k);
      for (int i = 0; i < 2; ++i) mxfp4_gemm(w, x.p, M, y.p, s, cfg);
      CK(cudaStreamSynchronize(s));
      std::printf("profile: %s %dx%d M=%d kernel %d%s launched twice\n", sh.name, N, K, M, cfg.kernel,
                  cfg.ring_warps ? (" ring_warps " + std::to_string(cfg.ring_warps)).c_str() : "");
    }
  }
}

}  // namespace

// --profile: for 36864 x 7168 and 7168 x 18432 at M = 1, one warm-up and one
// measured launch of each decode strip kernel (GemmConfig kernel 1, 5 and 4,
// K-slices from the shape) and nothing else, for a profiler such as
// `ncu --clock-control none -k regex:dense --launch-skip-before-match 0`.
void profile_run(cudaStream_t s, SeedFn next_seed) {
  for (const ProfileShape& sh : {ProfileShape{"dense_gate_up", 36864, 7168}, ProfileShape{"dense_down", 7168, 18432}})
    profile_gemm(sh, {1}, [](int) { return std::vector<int>{1, 5, 4}; }, s, next_seed);
}

// --profile --dense: 36864 x 7168 and 7168 x 18432 at M = 32 and 64, two
// launches each of the ring kernel 11 (auto plan, then a producer warp with 8
// and with 16 consumer warps); at M = 32 its timing probes (the copies alone,
// the weights' alone, B's alone; launch_dense_ws's modes) with 16 consumer
// warps (36864 x 7168) or 8 (7168 x 18432), and the strip kernel 8 at M = 8
// (the decode loads, for its DRAM traffic beside the ring's), for
// `ncu --clock-control none -k regex:dense`.
void profile_dense_run(cudaStream_t s, SeedFn next_seed) {
  auto ring_variants = [](int M) {
    std::vector<GemmConfig> v(M == 8 ? 1 : 3);
    if (M == 8) v[0].kernel = 8;
    else
      for (int i = 0; i < 3; ++i) v[i].kernel = 11, v[i].ring_warps = 8 * i;
    return v;
  };
  profile_gemm({"dense_gate_up", 36864, 7168}, {8, 32, 64}, ring_variants, s, next_seed);
  profile_gemm({"dense_down", 7168, 18432}, {8, 32, 64}, ring_variants, s, next_seed);
  for (const ProfileShape& sh : {ProfileShape{"dense_gate_up", 36864, 7168}, ProfileShape{"dense_down", 7168, 18432}}) {
    // The automatic plan's consumer warps (choose_ring_plan): 16 with a 256-row block per SM.
    const int N = sh.N, K = sh.K, M = 32, ring = N % 256 == 0 && N / 256 >= sm_count() ? 16 : 8;
    DeviceBuffer<uint8_t> c(size_t(N) * K / 2), sc(size_t(N) * K / 32), pc(c.n), ps(sc.n);
    fill_random_bytes(c.p, c.n, next_seed(), s);
    fill_random_scales(sc.p, sc.n, next_seed(), 118, 123, s);
    pack_mxfp4_device(c.p, sc.p, N, K, nullptr, pc.p, ps.p, s);
    Mxfp4DeviceWeight w;
    w.codes = pc.p, w.scales = ps.p, w.rows = N, w.cols = K;
    DeviceBuffer<uint16_t> x(size_t(M) * K), y(size_t(M) * N);
    fill_random_bf16(x.p, x.n, next_seed(), 1.0f, s);
    for (int mode : {kRingProbeCopies, kRingProbeWeightsOnly, kRingProbeBOnly}) {
      for (int i = 0; i < 2; ++i) launch_dense_ws(w, x.p, M, y.p, s, 0, 0, 0, ring, mode);
      CK(cudaStreamSynchronize(s));
      std::printf("profile: %s %dx%d M=%d kernel 11 ring_warps %d %s launched twice\n", sh.name, N, K, M, ring,
                  ring_mode_name(mode));
    }
  }
}

// --profile --moe-decode: the fused MoE at 1 token (8 distinct experts), two
// launches each of the rule before the wide kernels (direct, 3-tile batches,
// PDL) and of the wide kernels (W4A16, then W4A4 with x quantized by the
// kernels), for `ncu --clock-control none -k regex:"gate_up|down|qdq"`.
void profile_moe_decode_run(cudaStream_t s, SeedFn next_seed) {
  const int H = 7168, I = 2048, topk = 8, E = 384;
  const BenchMoeWeights mw(E, H, I, [next_seed] { return next_seed(); }, s);
  std::vector<int> ids(topk);
  std::vector<float> wts(topk, 1.f / topk);
  for (int k = 0; k < topk; ++k) ids[k] = int((next_seed() >> 33) % (E / topk)) * topk + k;
  DeviceBuffer<int> dids(topk);
  DeviceBuffer<float> dw(topk), out(H);
  DeviceBuffer<uint16_t> x(H);
  CK(cudaMemcpy(dids.p, ids.data(), topk * 4, cudaMemcpyHostToDevice));
  CK(cudaMemcpy(dw.p, wts.data(), topk * 4, cudaMemcpyHostToDevice));
  fill_random_bf16(x.p, x.n, next_seed(), 1.0f, s);
  DeviceBuffer<uint8_t> ws(fused_moe_workspace_bytes(mw.w, 1, topk));
  struct P {
    const char* label;
    int loads;
    bool w4a4;
  };
  for (const P& p : {P{"before (weight_loads 5)", 5, false}, P{"wide (weight_loads 6)", 6, false},
                     P{"wide, W4A4", 6, true}}) {
    MoeConfig cfg;
    cfg.path = 2;
    cfg.weight_loads = p.loads;
    cfg.pdl = 1;
    MoeWeights w = mw.w;
    w.w4a4 = p.w4a4;
    for (int i = 0; i < 2; ++i) fused_moe_decode(w, x.p, dids.p, dw.p, 1, topk, out.p, ws.p, s, cfg);
    CK(cudaStreamSynchronize(s));
    std::printf("profile: fused MoE 1 token, %s, launched twice\n", p.label);
  }
}

// --profile --dense-small: the automatic kernels at 8 and 16 tokens (kernel 5
// and the strip-pair kernel 9 on 36864 x 7168, kernels 8 and 9 on 7168 x 18432),
// two launches each, for `ncu --clock-control none -k regex:dense` (the pipes'
// utilization: ComputeWorkloadAnalysis). Session 7's ncu of kernels 8 and 9 and
// of the pipelined kernel 12 is in bench/mxfp4/raw-dense-small-2026-12-01-s7/.
void profile_small_run(cudaStream_t s, SeedFn next_seed) {
  profile_gemm({"dense_gate_up", 36864, 7168}, {8, 16}, [](int) { return std::vector<int>{0}; }, s, next_seed);
  profile_gemm({"dense_down", 7168, 18432}, {8, 16}, [](int) { return std::vector<int>{0}; }, s, next_seed);
}

}  // namespace mxbench
