// mxfp4_bench's fused-MoE rows (moe_bench.h), Kimi-K2.5 layer shape: per
// token count the inputs, a reference that dequantizes the checkpoint layout
// (reference_kernels.cuh), and per variant (moe_variants.h) a checked run,
// an events row and, for some, a CUDA-graph row. Apart from mxfp4_bench.cu
// so that each part reads as its steps.
#include "moe_bench.h"

#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "bench_rows.h"
#include "cuda/mxfp4_kernels.h"
#include "device_buffer.h"
#include "moe_phases.h"
#include "moe_variants.h"
#include "moe_weights.h"
#include "reference_kernels.cuh"
#include "timing.h"

namespace mxbench {

namespace {

using namespace mx::cuda;

constexpr int kHidden = 7168, kIntermediate = 2048, kTopk = 8;
// report.py's bound for rows that end in a BF16 rounding (its GEMM rows' bound).
constexpr double kBf16OutputErrBound = 5e-3;

// One token count's inputs: routing sets (rotated while timing) with their
// activations, output and scratch. Distinct experts per token, positive
// weights summing to 1. Prefill sizes use 2 sets (their weights exceed L2
// anyway).
struct MoeInputs {
  int T, sets;
  RandomRouting routing;
  DeviceBuffer<int> ids;
  DeviceBuffer<float> weights;
  DeviceBuffer<uint16_t> x;
  DeviceBuffer<uint16_t> xq;  // x quantize-dequantized per 32, for the W4A4 rows whose caller did it
  DeviceBuffer<float> out;
  size_t ws_bytes;
  DeviceBuffer<uint8_t> ws;

  MoeInputs(const MoeWeights& w, int tokens, int E, std::mt19937_64& rng, cudaStream_t s)
      : T(tokens), sets(tokens >= 512 ? 2 : 8), routing(sets, T, kTopk, E, rng),
        ids(routing.ids.size()), weights(routing.weights.size()),
        x(size_t(sets) * T * kHidden), xq(x.n), out(size_t(sets) * T * kHidden),
        ws_bytes(fused_moe_workspace_bytes(w, T, kTopk)), ws(ws_bytes * sets) {
    CK(cudaMemcpy(ids.p, routing.ids.data(), routing.ids.size() * 4, cudaMemcpyHostToDevice));
    CK(cudaMemcpy(weights.p, routing.weights.data(), routing.weights.size() * 4, cudaMemcpyHostToDevice));
    fill_random_bf16(x.p, x.n, next_seed(), 1.0f, s);
    mxfp4_qdq_activations(x.p, xq.p, sets * T, kHidden, s);
  }

  double avg_touched() const {
    return std::accumulate(routing.experts_touched.begin(), routing.experts_touched.end(), 0.0) / sets;
  }
  double flops() const { return 6.0 * T * kTopk * double(kHidden) * kIntermediate; }
  // From 512 tokens the MoE is compute-shaped: the floor is the larger of the
  // byte floor and the FLOPs at the BF16 dense datasheet peak (989 TFLOP/s).
  double floor() const {
    const double bytes =
        avg_touched() * 3.0 * kHidden * kIntermediate * 0.53125 + 2.0 * T * kHidden + 4.0 * T * kHidden;
    return T >= 512 ? std::max(floor_us(bytes), flops() / 989e6) : floor_us(bytes);
  }
};

// The reference on set 0, for the checked tokens.
struct MoeReference {
  std::vector<int> tokens;   // every token, or 32 evenly spaced ones when T > 40
  std::vector<double> ref;   // W4A16: [tokens][H]
  std::vector<double> ref4;  // the W4A4 contract: x and h quantize-dequantized per 32
};

// Every token, or 32 evenly spaced tokens when T > 40 (each reference pair is
// three launches).
std::vector<int> checked_tokens(int T) {
  std::vector<int> tokens;
  for (int t = 0; t < T; ++t)
    if (T <= 40 || t % (T / 32) == 0) tokens.push_back(t);
  return tokens;
}

// ref4 quantizes with the quantizer that check_quantizer proves bit-exact to
// the host reference.
MoeReference moe_reference(const BenchMoeWeights& mw, const MoeInputs& in, cudaStream_t s) {
  const int H = kHidden, I = kIntermediate;
  MoeReference r;
  r.tokens = checked_tokens(in.T);
  r.ref.assign(r.tokens.size() * size_t(H), 0.0);
  r.ref4.assign(r.ref.size(), 0.0);
  DeviceBuffer<float> gu(2 * I), y(H);
  DeviceBuffer<uint16_t> h(I), xq(H);
  std::vector<float> hy;
  for (size_t ci = 0; ci < r.tokens.size(); ++ci) {
    const int t = r.tokens[ci];
    const uint16_t* xt = in.x.p + size_t(t) * H;
    mxfp4_qdq_activations(xt, xq.p, 1, H, s);
    for (int k = 0; k < kTopk; ++k) {
      const int e = in.routing.ids[size_t(t) * kTopk + k];
      for (int q = 0; q < 2; ++q) {
        reference_linear(mw.r13c.p + e * mw.c13, mw.r13s.p + e * mw.s13, 2 * I, H, q ? xq.p : xt, 1, gu.p, s);
        reference_silu_mul(gu.p, I, h.p, s);
        if (q) mxfp4_qdq_activations(h.p, h.p, 1, I, s);
        reference_linear(mw.r2c.p + e * mw.c2, mw.r2s.p + e * mw.s2, H, I, h.p, 1, y.p, s);
        hy = y.download();
        std::vector<double>& rq = q ? r.ref4 : r.ref;
        for (int n = 0; n < H; ++n) rq[ci * H + n] += double(in.routing.weights[size_t(t) * kTopk + k]) * hy[n];
      }
    }
  }
  return r;
}

MoeConfig moe_config(const Variant& v) {
  MoeConfig cfg;
  cfg.path = v.path;
  cfg.down_k_slices = v.down_ks;
  cfg.weight_loads = v.loads;
  cfg.pdl = v.pdl;
  cfg.gate_up_k_slices = v.gate_up_ks;
  cfg.x_quantized = v.x_pre;
  cfg.ws_down_epilogue = v.ws_down;
  cfg.ws_gate_up_depth = v.ws_depth;
  cfg.ws_ctas = v.ws_ctas;
  cfg.ws_dequant = v.ws_dequant;
  cfg.ws_gate_up_items = v.ws_items;
  cfg.ws_box_rows = v.ws_box;
  cfg.ws_gate_up_cluster = v.gu_cluster;
  cfg.ws_down_items = v.down_items;
  return cfg;
}

// One variant's calls on one token count's inputs.
struct VariantRun {
  const Variant& v;
  const MoeInputs& in;
  MoeWeights w;
  MoeConfig cfg;  // moe_phase_note sets its phase_events between calls
  const uint16_t* x;
  cudaStream_t s;

  VariantRun(const Variant& variant, const MoeWeights& weights, const MoeInputs& inputs, cudaStream_t stream)
      : v(variant), in(inputs), w(weights), cfg(moe_config(variant)), x(variant.x_pre ? inputs.xq.p : inputs.x.p),
        s(stream) {
    w.w4a4 = v.w4a4;
  }
  // The call on routing set `st` with `config`.
  void run_set(int st, const MoeConfig& config) const {
    const int T = in.T;
    fused_moe_decode(w, x + size_t(st) * T * kHidden, in.ids.p + size_t(st) * T * kTopk,
                     in.weights.p + size_t(st) * T * kTopk, T, kTopk, in.out.p + size_t(st) * T * kHidden,
                     in.ws.p + in.ws_bytes * st, s, config);
  }
  void step(int st) const { run_set(st, cfg); }
};

// Set 0's output against the reference.
struct SetZeroCheck {
  std::vector<float> out;  // the whole output of set 0
  double rel_err;          // over the checked tokens, NaNs left out
  long nan;                // outputs left unwritten (NaN) over all T tokens
};

// Correctness on set 0: poisoned output and scratch, fresh inputs.
SetZeroCheck check_set_zero(const VariantRun& run, const MoeReference& ref) {
  const MoeInputs& in = run.in;
  CK(cudaMemsetAsync(in.out.p, 0xFF, in.out.n * 4, run.s));
  CK(cudaMemsetAsync(in.ws.p, 0xFF, in.ws.n, run.s));
  run.step(0);
  CK(cudaStreamSynchronize(run.s));
  SetZeroCheck c;
  c.out = in.out.download();
  const std::vector<double>& rv = run.v.w4a4 ? ref.ref4 : ref.ref;
  double num = 0, den = 0;
  c.nan = 0;
  for (size_t i = 0; i < size_t(in.T) * kHidden; ++i) c.nan += std::isnan(c.out[i]);
  for (size_t ci = 0; ci < ref.tokens.size(); ++ci)
    for (int n = 0; n < kHidden; ++n) {
      const double o = c.out[size_t(ref.tokens[ci]) * kHidden + n], r = rv[ci * kHidden + n];
      if (std::isnan(o)) continue;
      num += (o - r) * (o - r);
      den += r * r;
    }
  c.rel_err = std::sqrt(num / std::max(den, 1e-300));
  return c;
}

// Path 5 on a few CTAs: the reference covers 32 tokens, which may miss the
// tile of the CTAs' last items, so the whole output is also compared with
// the default grid's (FP32 atomics in another order: ~1e-7 apart).
double diff_from_default_grid(const VariantRun& run, const std::vector<float>& got) {
  MoeConfig full = run.cfg;
  full.ws_ctas = 0;
  CK(cudaMemsetAsync(run.in.out.p, 0xFF, run.in.out.n * 4, run.s));
  run.run_set(0, full);
  CK(cudaStreamSynchronize(run.s));
  const std::vector<float> base = run.in.out.download();
  double dn = 0, dd = 0;
  for (size_t i = 0; i < size_t(run.in.T) * kHidden; ++i) {
    dn += (double(got[i]) - base[i]) * (double(got[i]) - base[i]);
    dd += double(base[i]) * base[i];
  }
  return std::sqrt(dn / std::max(dd, 1e-300));
}

// The variant timed with CUDA events around each call, sets rotated.
Row events_row(VariantRun& run, const SetZeroCheck& check, double grid_diff, int E) {
  const MoeInputs& in = run.in;
  const int T = in.T, sets = in.sets;
  Row r;
  r.kernel = "fused_moe";
  r.shape = "kimi E" + std::to_string(E) + " H7168 I2048 top8";
  r.M = T;
  r.mode = run.v.w4a4 ? "W4A4" : "W4A16";
  r.us = median_us([&](int i) { run.step(i % sets); }, T >= 512 ? 20 : 200, run.s);
  r.windows = {last_timed_window()};  // the phase timings below time more
  r.floor_us = in.floor();
  r.rel_err = check.rel_err;
  r.nan_count = check.nan;
  r.extra = in.avg_touched();
  // Each expert's y rounded to BF16 (path 5's adders): a BF16 output's error,
  // judged as the GEMMs' rows are.
  if (fused_moe_rounds_expert_outputs(run.w, T, kTopk, run.cfg)) r.err_bound = kBf16OutputErrBound;
  char tf[64];
  std::snprintf(tf, sizeof tf, ", %.0f TFLOP/s", in.flops() / r.us / 1e6);
  r.note = std::string(run.v.label) + ", events" + (T >= 512 ? tf : "") + (T > 40 ? ", err on 32 tokens" : "");
  if (run.v.ws_ctas) {  // the report's error bound then judges the whole output too
    char gd[96];
    std::snprintf(gd, sizeof gd, ", whole output vs one CTA per SM %.2e", grid_diff);
    r.note += gd;
    r.rel_err = std::isfinite(grid_diff) ? std::max(r.rel_err, grid_diff) : 1.0;
  }
  // Path 5 (forced, or auto, from 2048 tokens here): each phase of the call timed.
  if (T >= 2048 && (run.v.path == 0 || run.v.path == 5) && run.v.ws_ctas == 0)
    r.note += moe_phase_note([&](int i) { run.step(i % sets); }, run.cfg, 10, run.s);
  return r;
}

// The same steps replayed from a CUDA graph (proves capture, removes launch
// gaps): the events row with the graph's mean time per set.
Row graph_row(const VariantRun& run, const Row& events) {
  const int sets = run.in.sets;
  cudaGraph_t graph;
  cudaGraphExec_t exec;
  CK(cudaStreamBeginCapture(run.s, cudaStreamCaptureModeThreadLocal));
  for (int st = 0; st < sets; ++st) run.step(st);
  CK(cudaStreamEndCapture(run.s, &graph));
  CK(cudaGraphInstantiate(&exec, graph, 0));
  const double graph_us = median_us([&](int) { CK(cudaGraphLaunch(exec, run.s)); }, 50, run.s) / sets;
  cudaGraphExecDestroy(exec);
  cudaGraphDestroy(graph);
  Row g = events;
  g.us = graph_us;
  g.windows = {last_timed_window()};
  g.note = std::string(run.v.label) + ", CUDA graph, mean of " + std::to_string(sets) + " steps";
  return g;
}

// The variant's rows: checked on set 0, timed with events, then from a graph
// if gets_graph_row. `warmed`: whether the GPU already ran at this T.
void bench_variant(const Variant& v, const MoeWeights& w, const MoeInputs& in, const MoeReference& ref, int E,
                   bool& warmed, cudaStream_t s) {
  VariantRun run(v, w, in, s);
  if (!warmed && in.T <= 40) {  // the GPU runs the first timed rows at full clocks
    warmed = true;
    for (int i = 0; i < 2000 / in.T; ++i) run.step(i % in.sets);
  }
  const SetZeroCheck check = check_set_zero(run, ref);
  const double grid_diff = v.ws_ctas ? diff_from_default_grid(run, check.out) : -1;
  const Row r = events_row(run, check, grid_diff, E);
  emit(r);
  if (gets_graph_row(v, in.T)) emit(graph_row(run, r));
}

}  // namespace

void bench_moe(const std::vector<int>& Ts, cudaStream_t s, int E) {
  const BenchMoeWeights mw(E, kHidden, kIntermediate, [] { return next_seed(); }, s);
  std::mt19937_64 rng(next_seed());
  for (int T : Ts) {
    const MoeInputs in(mw.w, T, E, rng, s);
    const MoeReference ref = moe_reference(mw, in, s);
    bool warmed = false;
    for (const Variant& v : moe_variants(T, g_decode))
      if (moe_row_selected(v.label)) bench_variant(v, mw.w, in, ref, E, warmed, s);
  }
}

}  // namespace mxbench
