// Random MXFP4 MoE weights for the bench's fused-MoE parts (moe_bench.cu,
// bench_w4a4_fp8.cu, profile_runs.cu): the checkpoint layout the references
// read, and the kernel layout (gate_up rows interleaved) fused_moe_decode reads.
#pragma once
#include <cuda_runtime_api.h>

#include <cstdint>
#include <numeric>
#include <random>
#include <vector>

#include "cuda/mxfp4_kernels.h"
#include "device_buffer.h"
#include "host_layout.h"
#include "reference_kernels.cuh"

namespace mxbench {

struct BenchMoeWeights {
  int E, H, I;
  size_t c13, s13, c2, s2;                   // per-expert code / scale bytes of gate_up and down
  DeviceBuffer<uint8_t> r13c, r13s, r2c, r2s;  // checkpoint layout, expert after expert
  DeviceBuffer<uint8_t> p13c, p13s, p2c, p2s;  // kernel layout
  mx::cuda::MoeWeights w;

  // Codes uniform, scale bytes in [118, 123]; `seed()` gives each buffer's seed.
  template <class Seed>
  BenchMoeWeights(int experts, int hidden, int intermediate, Seed seed, cudaStream_t s)
      : E(experts), H(hidden), I(intermediate),
        c13(size_t(2 * I) * H / 2), s13(size_t(2 * I) * H / 32), c2(size_t(H) * I / 2), s2(size_t(H) * I / 32),
        r13c(c13 * E), r13s(s13 * E), r2c(c2 * E), r2s(s2 * E),
        p13c(r13c.n), p13s(r13s.n), p2c(r2c.n), p2s(r2s.n) {
    fill_random_bytes(r13c.p, r13c.n, seed(), s);
    fill_random_scales(r13s.p, r13s.n, seed(), 118, 123, s);
    fill_random_bytes(r2c.p, r2c.n, seed(), s);
    fill_random_scales(r2s.p, r2s.n, seed(), 118, 123, s);
    const std::vector<int64_t> order = gate_up_order(I);
    DeviceBuffer<int64_t> dorder(order.size());
    dorder.upload(order);
    for (int e = 0; e < E; ++e) {
      mx::cuda::pack_mxfp4_device(r13c.p + e * c13, r13s.p + e * s13, 2 * I, H, dorder.p, p13c.p + e * c13,
                                  p13s.p + e * s13, s);
      mx::cuda::pack_mxfp4_device(r2c.p + e * c2, r2s.p + e * s2, H, I, nullptr, p2c.p + e * c2, p2s.p + e * s2, s);
    }
    check_cuda_call(cudaStreamSynchronize(s), "BenchMoeWeights");  // dorder dies here
    w.w13_codes = p13c.p;
    w.w13_scales = p13s.p;
    w.w2_codes = p2c.p;
    w.w2_scales = p2s.p;
    w.experts = E;
    w.hidden = H;
    w.intermediate = I;
  }
};

// `sets` random routings of T tokens: topk distinct experts per token (ids,
// [sets][T][topk]) with positive weights summing to 1 per token (weights), and
// how many distinct experts each set touches (experts_touched).
struct RandomRouting {
  std::vector<int> ids;
  std::vector<float> weights;
  std::vector<double> experts_touched;

  RandomRouting(int sets, int T, int topk, int E, std::mt19937_64& rng)
      : ids(size_t(sets) * T * topk), weights(ids.size()), experts_touched(sets) {
    std::vector<int> perm(E);
    for (int st = 0; st < sets; ++st) {
      std::vector<char> used(E, 0);
      for (int t = 0; t < T; ++t) {
        std::iota(perm.begin(), perm.end(), 0);
        const size_t row = (size_t(st) * T + t) * topk;
        float sum = 0;
        for (int k = 0; k < topk; ++k) {
          std::swap(perm[k], perm[k + rng() % (E - k)]);
          ids[row + k] = perm[k];
          used[perm[k]] = 1;
          weights[row + k] = 0.1f + float(rng() % 1000) / 1000.f;
          sum += weights[row + k];
        }
        for (int k = 0; k < topk; ++k) weights[row + k] /= sum;
      }
      experts_touched[st] = std::accumulate(used.begin(), used.end(), 0.0);
    }
  }
};

}  // namespace mxbench
