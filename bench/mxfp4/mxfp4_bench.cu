// MXFP4 kernel benchmark and GPU correctness check (one run, one GPU).
//
// For every kernel: fresh random inputs (seed printed), output poisoned with
// NaN before the checked run, relative error ||out - ref|| / ||ref|| against a
// reference that dequantizes the checkpoint layout element by element (FP32
// accumulate), and a count of outputs left unwritten (still NaN). Then timing:
// CUDA events around each launch, median of many, weights rotated over copies
// that together exceed the 60 MB L2. The byte floor is the MXFP4 bytes over the
// copy bandwidth measured at the start of the same run.
//
// Usage: mxfp4_bench [--quick] [--profile] [--moe-prefill [--moe-tokens T]] [--decode] [--moe-decode] [--dense] [--dense-small] [--dense-fp8] [--read-probe] [--mma-rates] [--moe-only A|B..] [--json FILE] [--seed N]
// --moe-prefill: only the copy bandwidth and the fused MoE at 512, 2048 and
// 8192 tokens (the prefill paths; one call well under a minute); --moe-tokens T:
// only T tokens.
// --decode: only the copy bandwidth, the two dense decode shapes at M = 1 and 8
// (W4A16), the big-scale path at M = 1, and the fused MoE at 1, 2 and 8
// tokens, each with the decode kernel variants beside auto, and 40 tokens.
// --moe-decode: only the copy bandwidth and --decode's fused-MoE rows
// (--profile --moe-decode: the fused MoE at 1 token, for ncu).
// --dense: only the copy bandwidth and the dense shapes at M = 16, 32 and 64
// (W4A16; expert shapes and the big-scale path at 16 and 64): the previous
// kernel for each M, the wgmma kernel (kernel 7, auto and 2 K splits) and the
// ring kernel (kernel 11: stream-K with 1-3 CTAs per SM, two strips per warp,
// K splits, a producer warp with 8 or 16 consumer warps) beside auto.
// --dense-fp8: only the copy bandwidth and W4A4 on the dense shapes at M = 12,
//   16, 32 and 64: auto (the qdq, then the BF16 kernels) beside the FP8 ring
//   kernel (GemmConfig::fp8; 8, 16 or auto consumer warps), events and graphs
// --dense-small: only the copy bandwidth and the dense shapes at M = 1, 8, 12
// and 16 (expert shapes, the big-scale path and two MLA projection shapes,
// o_proj 7168x8192 and q_b_proj 12288x1536, at 1 and 16): the strip kernels
// beside the balanced kernel (kernel 8) with each of its load batches,
// from 9 tokens the strip-pair kernel (kernel 9), the stream-K kernel
// (kernel 10), the software-pipelined kernel 12 and, from 9 tokens, kernel 9's
// loop on x in its B-fragment order (permuted_x_probe.h); first a read-only
// kernel over the two large weights' bytes (the practical floor of one launch).
// --read-probe: only the copy bandwidth and, for the two large weights, that
// read-only kernel beside other ways of streaming the same bytes (LDG per-CTA
// ranges, bulk copies into a shared-memory ring; read_floor_probe.h).
// --mma-rates: only the copy bandwidth and the issue rates of mma.sync, wgmma
// with A from registers (n = 16..128) and the dequant's instructions, each
// alone on every SM at 4..20 warps per SM (mma_rates.h).
// --moe-only A|B..: only the fused-MoE rows whose label contains A or B ..;
// a piece "=LABEL" takes that label exactly ("=auto": auto's rows without
// the "(auto before ...)" ones).
//
// The fused-MoE rows are moe_bench.cu's (variants in moe_variants.cc); the
// row table, emit() and the seed sequence, shared by both, bench_rows.h.
#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <functional>
#include <random>
#include <stdexcept>
#include <string>
#include <tuple>
#include <vector>

#include "core/dtype.h"
#include "cuda/dense_fp8_quant.h"
#include "cuda/device_info.h"
#include "cuda/host/fp8_dense_layout.h"
#include "cuda/host/fp8_fold.h"
#include "cuda/host/mxfp4_reference.h"
#include "cuda/mxfp4_gemm_ws.h"
#include "cuda/mxfp4_kernels.h"
#include "host_layout.h"
#include "reference_kernels.cuh"
#include "timing.h"
#include "device_buffer.h"
#include "bench_w4a4_fp8.h"
#include "permuted_x_probe.h"
#include "read_floor_probe.h"
#include "profile_runs.h"
#include "bench_rows.h"
#include "mma_rates.h"
#include "moe_bench.h"

namespace {

using namespace mx::cuda;
using namespace mxbench;

void measure_copy(cudaStream_t s) {
  const size_t bytes = size_t(2) << 30;
  DeviceBuffer<uint8_t> a(bytes), b(bytes);
  CK(cudaMemsetAsync(a.p, 1, bytes, s));
  const double us = median_us([&](int) { CK(cudaMemcpyAsync(b.p, a.p, bytes, cudaMemcpyDeviceToDevice, s)); }, 20, s);
  g_copy_gbps = 2.0 * bytes / us / 1e3;
  std::printf("copy bandwidth: %.1f GB/s (read + write, 2 GiB, median of 20)\n", g_copy_gbps);
  Row r;
  r.kernel = "copy";
  r.shape = "2GiB";
  r.us = us;
  r.note = std::to_string(int(g_copy_gbps)) + " GB/s";
  emit(r);
}

struct ErrStats {
  double rel = 0;
  long nan = 0;
};

ErrStats compare(const std::vector<uint16_t>& out_bf16, const std::vector<float>& ref) {
  double num = 0, den = 0;
  long nan = 0;
  for (size_t i = 0; i < ref.size(); ++i) {
    const float o = mx::bf16_to_f32(out_bf16[i]);
    if (std::isnan(o)) { ++nan; continue; }
    num += (double(o) - ref[i]) * (double(o) - ref[i]);
    den += double(ref[i]) * ref[i];
  }
  return {std::sqrt(num / std::max(den, 1e-300)), nan};
}

// A bit-exact check's row: `mismatches` values differ from what they must be
// (report.py fails the run when that is not 0).
void emit_bitexact(const char* kernel, const char* shape, int M, const char* mode, long mismatches,
                   const std::string& note) {
  Row r;
  r.kernel = kernel;
  r.shape = shape;
  r.M = M;
  r.mode = mode;
  r.nan_count = mismatches;
  r.note = note;
  emit(r);
}

// The W4A4 quantizer on the GPU against the host reference, bit for bit, on
// random and adversarial blocks.
void check_quantizer(cudaStream_t s) {
  const int M = 64, K = 7168;
  const std::vector<uint16_t> x = quantizer_check_input(M, K, next_seed(), 64);
  DeviceBuffer<uint16_t> dx(x.size()), dq(x.size());
  CK(cudaMemcpy(dx.p, x.data(), x.size() * 2, cudaMemcpyHostToDevice));
  CK(cudaMemset(dq.p, 0xFF, x.size() * 2));
  CK(cudaDeviceSynchronize());  // the copies (legacy stream) are done before s reads them
  mxfp4_qdq_activations(dx.p, dq.p, M, K, s);
  CK(cudaStreamSynchronize(s));
  std::vector<uint16_t> got = dq.download(), want(x.size());
  for (size_t b = 0; b < x.size() / 32; ++b) qdq_block_reference(x.data() + b * 32, want.data() + b * 32);
  long diff = 0;
  for (size_t i = 0; i < x.size(); ++i) diff += got[i] != want[i];
  emit_bitexact("w4a4_quantizer", "64x7168", M, "bitexact", diff, diff == 0 ? "bit-exact" : "MISMATCH");
  if (diff) std::printf("QUANTIZER MISMATCH: %ld of %zu values differ\n", diff, x.size());
}

// The dense FP8 path's activation quantizer (quantize_x_fp8) against the
// host reference, byte for byte: MXFP4 codes and scales of every 32-block,
// folded into E4M3 relative to the largest scale of its stage (128 K) at
// their place in the ring's B layout (fp8_dense_mma_col), rows M..NT-1
// zero, and the (stage, row) unfold factors; random and adversarial blocks,
// long K.
void check_dense_fp8_quantizer(cudaStream_t s) {
  for (auto [M, NT, K] : {std::tuple{13, 16, 7168}, std::tuple{32, 32, 18432}, std::tuple{61, 64, 2048}}) {
    const std::vector<uint16_t> x = quantizer_check_input(M, K, next_seed(), 64);
    const int stages = K / 128;
    // A stage: 2 K tiles of NT x 64 bytes, then NT floats padded to 128 bytes.
    const size_t stage_bytes = fp8_x_stage_bytes(NT);
    DeviceBuffer<uint16_t> dx(x.size());
    DeviceBuffer<uint8_t> xp(stages * stage_bytes);
    dx.upload(x);
    CK(cudaDeviceSynchronize());  // the upload (legacy stream) is done before s reads it
    CK(cudaMemsetAsync(xp.p, 0xAB, xp.n, s));
    quantize_x_fp8(dx.p, M, NT, K, xp.p, s);
    const std::vector<uint8_t> got = xp.download();
    long bad = 0;
    for (int n = 0; n < NT; ++n)
      for (int st = 0; st < stages; ++st) {
        QuantizedBlock blocks[4];
        int smax = 0;
        if (n < M)
          for (int b = 0; b < 4; ++b) {
            blocks[b] = quantize_block_reference(&x[size_t(n) * K + size_t(st) * 128 + b * 32]);
            smax = std::max(smax, int(blocks[b].scale));
          }
        const uint8_t* stage = got.data() + st * stage_bytes;
        float factor;
        std::memcpy(&factor, stage + fp8_x_b_bytes(NT) + n * 4, 4);
        bad += factor != (n < M ? fold_unscale(smax) : 0.f);
        for (int kin = 0; kin < 128; ++kin) {
          const int mma = fp8_dense_mma_col(kin % 64);
          const QuantizedBlock& qb = blocks[kin / 32];
          const uint8_t want = n < M ? fold_code_reference(qb.codes[kin % 32], qb.scale - smax) : uint8_t(0);
          bad += stage[((size_t(kin / 64) * 4 + mma / 16) * NT + n) * 16 + mma % 16] != want;
        }
      }
    const std::string shape = std::to_string(M) + "x" + std::to_string(K) + " NT" + std::to_string(NT);
    emit_bitexact("dense_fp8_quantizer", shape.c_str(), M, "bitexact", bad, bad == 0 ? "bit-exact" : "MISMATCH");
  }
}

struct Shape {
  const char* name;
  int N, K;
};

// Device re-layout against the host re-layout on one weight.
void check_device_pack(cudaStream_t s) {
  const int N = 7168, K = 2048;
  DeviceBuffer<uint8_t> codes(size_t(N) * K / 2), scales(size_t(N) * K / 32), pc(codes.n), ps(scales.n);
  fill_random_bytes(codes.p, codes.n, next_seed(), s);
  fill_random_scales(scales.p, scales.n, next_seed(), 100, 140, s);
  pack_mxfp4_device(codes.p, scales.p, N, K, nullptr, pc.p, ps.p, s);
  CK(cudaStreamSynchronize(s));
  std::vector<uint8_t> hc = codes.download(), hs = scales.download();
  std::vector<uint8_t> hpc, hps;
  const bool same = mxbench::host_pack(hc, hs, N, K, hpc, hps) && hpc == pc.download() &&
                    hps == ps.download();
  emit_bitexact("device_pack", "7168x2048", 0, "vs_host", same ? 0 : 1, same ? "identical" : "MISMATCH");
}

// Two dependent GEMMs, y1 = W1 x and y2 = W2 y1, the second launched with
// programmatic dependent launch right behind the first (y1 poisoned before
// each run): y2 must equal, bit for bit, the same launches without PDL and
// with a synchronization between them. A kernel that read x before its
// griddepcontrol.wait would read y1 while the first GEMM still writes it
// (a build without the wait failed the 16-token cases, not the 1-token ones).
void check_pdl_chain(cudaStream_t s) {
  const int N = 4096, K = 4096;
  DeviceBuffer<uint8_t> raw_c(size_t(N) * K / 2), raw_s(size_t(N) * K / 32);
  DeviceBuffer<uint8_t> c1(raw_c.n), s1(raw_s.n), c2(raw_c.n), s2(raw_s.n);
  for (auto [c, sc] : {std::pair{&c1, &s1}, std::pair{&c2, &s2}}) {
    fill_random_bytes(raw_c.p, raw_c.n, next_seed(), s);
    fill_random_scales(raw_s.p, raw_s.n, next_seed(), 118, 123, s);
    pack_mxfp4_device(raw_c.p, raw_s.p, N, K, nullptr, c->p, sc->p, s);
  }
  Mxfp4DeviceWeight w1, w2;
  w1.codes = c1.p, w1.scales = s1.p, w2.codes = c2.p, w2.scales = s2.p;
  w1.rows = w2.rows = N;
  w1.cols = w2.cols = K;
  // Auto and every strip kernel that takes PDL (kernel 8's rule says no: forced here).
  const std::pair<int, int> cases[] = {{1, 0}, {1, 2}, {1, 5}, {1, 6}, {1, 8}, {1, 12},
                                       {16, 0}, {16, 2}, {16, 9}, {16, 12}};
  for (auto [M, kernel] : cases) {
    DeviceBuffer<uint16_t> x(size_t(M) * K), y1(size_t(M) * N), y2(y1.n);
    fill_random_bf16(x.p, x.n, next_seed(), 1.0f, s);
    GemmConfig plain, pdl;
    plain.kernel = pdl.kernel = kernel;
    plain.pdl = -1;
    pdl.pdl = 1;
    mxfp4_gemm(w1, x.p, M, y1.p, s, plain);
    CK(cudaStreamSynchronize(s));
    mxfp4_gemm(w2, y1.p, M, y2.p, s, plain);
    CK(cudaStreamSynchronize(s));
    const std::vector<uint16_t> want = y2.download();
    long diff = 0;
    for (int rep = 0; rep < 10; ++rep) {
      CK(cudaMemsetAsync(y1.p, 0xFF, y1.n * 2, s));
      CK(cudaMemsetAsync(y2.p, 0xFF, y2.n * 2, s));
      mxfp4_gemm(w1, x.p, M, y1.p, s, pdl);
      mxfp4_gemm(w2, y1.p, M, y2.p, s, pdl);
      CK(cudaStreamSynchronize(s));
      const std::vector<uint16_t> got = y2.download();
      for (size_t i = 0; i < got.size(); ++i) diff += got[i] != want[i];
    }
    emit_bitexact("pdl_chain", "4096x4096 twice", M, "bitexact", diff,
                  (kernel ? "kernel " + std::to_string(kernel) : std::string("auto")) +
                      (diff == 0 ? ", identical over 10 runs" : ", MISMATCH"));
  }
}

// The GEMM replayed from a CUDA graph, without the gaps that events between
// launches add: kChain launches (weight copies rotated past the L2) captured
// back to back, so each launch follows another GEMM. With programmatic
// dependent launch (the strip kernels' default up to 16 tokens) a launch's
// CTAs start in the SM slots the previous one leaves and ask the L2 for their
// first weight tiles while it finishes (in the engine the GEMM follows a
// conversion kernel instead, which gives less of that overlap). Each case: y poisoned, the
// graph run once and its y checked against the reference. Then the cases are
// timed in kChainRounds interleaved rounds (every case once per round, 10
// replays each), and a case's time per launch is the median over its rounds:
// the board's power cap moves the SM clock by up to 20% over seconds
// (gpu_clock.h), and timing the cases one after another gave each its own
// moment of that swing (the first case, after an idle host-side setup, ran at
// full clock); interleaved, every case sees the same mix.
constexpr int kChain = 16;
constexpr int kChainRounds = 7;

struct ChainCase {
  std::string label;
  GemmConfig cfg;
  std::function<void()> before = nullptr;  // launched before each GEMM (the W4A4 rows' qdq)
  const uint16_t* x = nullptr;              // the GEMM's input instead of the rows' x (FP8: raw x)
  bool probe = false;                       // a timing probe that leaves y wrong: timed, not checked
};

ChainCase chain_case(std::string label, int pdl, int prefetch_tiles, int kernel = 0, int k_slices = 0,
                     int batch_tiles = 0) {
  ChainCase c{std::move(label), {}};
  c.cfg.pdl = pdl;
  c.cfg.prefetch_tiles = prefetch_tiles;
  c.cfg.kernel = kernel;
  c.cfg.k_slices = k_slices;
  c.cfg.batch_tiles = batch_tiles;
  return c;
}

template <class Weight>
void emit_chain_rows(const Weight& weight, const uint16_t* x, int M, const DeviceBuffer<uint16_t>& y,
                     const DeviceBuffer<float>& ref, const Row& base, cudaStream_t s,
                     const std::vector<ChainCase>& cases) {
  std::vector<cudaGraphExec_t> execs;
  std::vector<Row> rows;
  for (const ChainCase& cc : cases) {
    cudaGraph_t graph;
    cudaGraphExec_t exec;
    CK(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal));
    try {
      for (int i = 0; i < kChain; ++i) {
        if (cc.before) cc.before();
        mxfp4_gemm(weight(i + 1), cc.x ? cc.x : x, M, y.p, s, cc.cfg);
      }
    } catch (...) {  // a refused configuration: leave the stream usable for the error report
      if (cudaStreamEndCapture(s, &graph) == cudaSuccess && graph) cudaGraphDestroy(graph);
      for (cudaGraphExec_t e : execs) cudaGraphExecDestroy(e);
      throw;
    }
    CK(cudaStreamEndCapture(s, &graph));
    CK(cudaGraphInstantiate(&exec, graph, 0));
    CK(cudaGraphDestroy(graph));
    CK(cudaMemsetAsync(y.p, 0xFF, y.n * 2, s));  // NaN poison
    CK(cudaGraphLaunch(exec, s));
    CK(cudaStreamSynchronize(s));
    const ErrStats err = compare(y.download(), ref.download());
    Row r = base;
    r.rel_err = err.rel;
    r.nan_count = err.nan;
    if (cc.probe) r.kernel = "gemm_probe", r.nan_count = -1, r.rel_err = -1;
    r.note = cc.label + ", CUDA graph of " + std::to_string(kChain) + " launches, median of " +
             std::to_string(kChainRounds) + " interleaved rounds";
    execs.push_back(exec);
    rows.push_back(r);
  }
  // Each round starts one case later, so no case always runs first (after
  // the idle setup) or right after the same neighbour.
  std::vector<std::vector<double>> per_round(cases.size());
  for (int round = 0; round < kChainRounds; ++round)
    for (size_t i = 0; i < cases.size(); ++i) {
      const size_t c = (i + size_t(round)) % cases.size();
      per_round[c].push_back(median_us([&](int) { CK(cudaGraphLaunch(execs[c], s)); }, 10, s, 2) / kChain);
      rows[c].windows.push_back(last_timed_window());
    }
  for (size_t c = 0; c < cases.size(); ++c) {
    rows[c].us = median_of(per_round[c]);
    emit(rows[c]);
    CK(cudaGraphExecDestroy(execs[c]));
  }
}

bool g_dense_fp8 = false;  // --dense-fp8: W4A4 on BF16 (qdq) against the FP8 ring kernel

void bench_dense(const Shape& sh, const std::vector<int>& Ms, cudaStream_t s, bool big_scales) {
  const int N = sh.N, K = sh.K;
  const int sms = mx::cuda::sm_count();
  const size_t cb = size_t(N) * K / 2, sb = size_t(N) * K / 32;
  DeviceBuffer<uint8_t> raw_c(cb), raw_s(sb);
  fill_random_bytes(raw_c.p, cb, next_seed(), s);
  // Scales around 2^-6 as in real checkpoints; the big-scale variant spans the
  // whole valid range 0..254 (overflows nothing: products stay finite in FP32).
  if (big_scales) fill_random_scales(raw_s.p, sb, next_seed(), 100, 140, s);
  else fill_random_scales(raw_s.p, sb, next_seed(), 118, 123, s);
  const double wbytes = double(cb + sb);
  const int copies = int(std::clamp(std::ceil(240e6 / wbytes), 1.0, 32.0));
  DeviceBuffer<uint8_t> pc(cb * copies), ps(sb * copies);
  pack_mxfp4_device(raw_c.p, raw_s.p, N, K, nullptr, pc.p, ps.p, s);
  for (int c = 1; c < copies; ++c) {
    CK(cudaMemcpyAsync(pc.p + c * cb, pc.p, cb, cudaMemcpyDeviceToDevice, s));
    CK(cudaMemcpyAsync(ps.p + c * sb, ps.p, sb, cudaMemcpyDeviceToDevice, s));
  }
  // --dense-fp8: the FP8 dense layout of every copy and the rows' largest scales.
  DeviceBuffer<uint8_t> fc(g_dense_fp8 ? cb * copies : 0), row_smax(g_dense_fp8 ? size_t(N) : 0);
  DeviceBuffer<int> slow(1);
  auto weight = [&](int c) {
    Mxfp4DeviceWeight w;
    w.codes = pc.p + size_t(c % copies) * cb;
    w.scales = ps.p + size_t(c % copies) * sb;
    w.rows = N;
    w.cols = K;
    w.big_scales = big_scales;
    if (g_dense_fp8) w.fp8_codes = fc.p + size_t(c % copies) * cb, w.row_smax = row_smax.p;
    return w;
  };
  if (g_dense_fp8) {
    pack_fp8_dense_device(weight(0), fc.p, row_smax.p, slow.p, s);
    for (int c = 1; c < copies; ++c) CK(cudaMemcpyAsync(fc.p + c * cb, fc.p, cb, cudaMemcpyDeviceToDevice, s));
    const int slow_blocks = slow.download()[0];
    std::printf("dense-fp8 %s: FP8 layout made, %d blocks beyond the fast fold table\n", sh.name, slow_blocks);
    if (slow_blocks) throw std::runtime_error("weights with blocks beyond the fast fold table");
  }
  for (int M : Ms) {
    DeviceBuffer<uint16_t> x(size_t(M) * K), xq(size_t(M) * K), y(size_t(M) * N);
    DeviceBuffer<float> ref(size_t(M) * N);
    fill_random_bf16(x.p, x.n, next_seed(), 1.0f, s);
    const std::vector<const char*> modes = g_dense_fp8 ? std::vector<const char*>{"W4A4"}
                                           : g_decode || g_dense || g_dense_small ? std::vector<const char*>{"W4A16"}
                                                                                  : std::vector<const char*>{"W4A16", "W4A4"};
    for (const char* mode : modes) {
      const bool a4 = mode[3] == '4';
      if (a4) mxfp4_qdq_activations(x.p, xq.p, M, K, s);
      const uint16_t* xin = a4 ? xq.p : x.p;
      reference_linear(raw_c.p, raw_s.p, N, K, xin, M, ref.p, s);
      // (kernel, k_slices or k_splits, cluster): 0 = auto. Kernel 1 = strip
      // kernel with register loads (the first version), 2 = strip kernel with
      // the cp.async ring, 3 = tiled tensor-core kernel, 4 = strip kernel with
      // the bulk-copy ring (k_slices 4, K split over a cluster of 1 or 2 CTAs),
      // 5 = strip kernel 1 with each batch's loads issued first, 7 = wgmma
      // kernel (kparam = K splits, 0 = auto).
      struct GemmVariant {
        int kernel, kparam, cluster, batch = 0;  // batch: GemmConfig::batch_tiles (kernels 8-10)
        int ring = 0;                            // GemmConfig::ring_warps (kernel 11)
        int pdl = 0, prefetch = 0;               // GemmConfig::pdl, prefetch_tiles (strip kernels)
        int mode = 0;  // kernel 11 with a producer warp: launch_dense_ws's DenseRingMode (a timing probe)
        int fp8 = 0;   // GemmConfig::fp8 (W4A4 on FP8 MMAs: x quantized inside, not by the qdq)
      };
      std::vector<GemmVariant> variants = {{0, 0, 0}};
      if (g_dense_fp8) {
        // --dense-fp8: the FP8 ring kernel (auto consumer warps, 8, 16) beside auto W4A4 (qdq + BF16 kernels).
        for (int ring : {0, 8, 16})
          if (ring != 16 || N % 256 == 0) variants.push_back({11, 0, 0, 0, ring, 0, 0, 0, 1});
      } else if (g_dense_small) {
        // --dense-small: the strip kernels of this M beside the balanced kernel.
        if (!big_scales) {
          variants.push_back({M <= 8 ? 6 : 1, 0, 0});
          variants.push_back({5, 0, 0});
          if (M > 8) variants.push_back({5, 8, 0});
        }
        for (int batch : M <= 8 ? std::vector<int>{3, 4} : std::vector<int>{1, 3})
          variants.push_back({8, 0, 0, batch});
        if (M > 8 && N % 32 == 0)
          for (auto [ks, batch] : {std::pair{4, 1}, std::pair{4, 2}, std::pair{8, 1}, std::pair{8, 2}})
            variants.push_back({9, ks, 0, batch});
        // Stream-K (kernel 10): {kernel, CTAs per SM (0 = all that fit), strips per warp, batch}.
        if (M <= 8)
          variants.insert(variants.end(), {{10, 0, 1, 3}, {10, 0, 1, 4}, {10, 0, 2, 2}});
        else if (N % 32 == 0)
          variants.insert(variants.end(), {{10, 0, 2, 1}, {10, 0, 2, 2}});
        // Kernel 12 (software-pipelined loads): {12, K-slices (0 = kernel 9's rule), 0, tiles in flight}.
        if (M <= 8)
          variants.insert(variants.end(), {{12, 0, 0, 2}, {12, 0, 0, 3}});
        else if (N % 32 == 0)
          for (auto [ks, depth] : {std::pair{4, 2}, std::pair{4, 3}, std::pair{8, 2}, std::pair{8, 3}})
            variants.push_back({12, ks, 0, depth});
      } else if (g_dense) {
        // --dense: the previous kernels of this token range beside the wgmma kernel.
        if (!big_scales) variants.push_back({M > 32 ? 3 : 1, 0, 0});
        if (!big_scales && M > 32) variants.push_back({1, 4, 0});
        for (int splits : {0, 2})
          if (!big_scales || splits == 0) variants.push_back({7, splits, 0});
        // Kernel 11 (mbarrier ring, mxfp4_gemm_ws.cu): stream-K (k_splits 0)
        // or K splits in a cluster, resident CTAs per SM (batch_tiles), 0 = auto.
        variants.push_back({11, 0, 0});
        if (!big_scales) {
          for (int ctas : {1, 2, 3})
            if (ctas < 3 || M <= 32) variants.push_back({11, 0, 0, ctas});
          // Two strips per warp (cluster = strips per CTA 16), stream-K.
          if (M <= 32 && N % 256 == 0)
            for (int ctas : {1, 2}) variants.push_back({11, 0, 16, ctas});
          for (auto [splits, ctas] : {std::pair{1, 2}, std::pair{2, 1}, std::pair{2, 2}})
            variants.push_back({11, splits, 0, ctas});
          // 4 K splits at 64 tokens on few row blocks (7168x18432: 224 CTAs,
          // 1 or 2 per SM) beside auto's 2 splits (112 CTAs, 20 SMs idle).
          if (M > 32 && N / 128 < sms)
            for (int ctas : {1, 2}) variants.push_back({11, 4, 0, ctas});
        }
        // A producer warp filling the ring: 8 consumer warps (2 CTAs per SM)
        // or 16 (1 CTA per SM, each activation stage shared by 256 rows).
        for (int ring : {8, 16})
          if (ring == 8 || N % 256 == 0) variants.push_back({11, 0, 0, 0, ring});
        // 16 consumer warps of two strips each (512-row CTAs: each B stage
        // serves twice the weight rows), up to 32 tokens.
        if (!big_scales && M > 16 && M <= 32 && N % 512 == 0) variants.push_back({11, 0, 32, 0, 16});
        // The timing probes (where the time goes): no MMA, no dequant, the
        // copies alone, the weights' copies alone, B's copies alone, the
        // weights' copies without the segment ends, the kernel without the
        // cut row blocks (dropped, or stored but not summed), without the
        // whole row blocks' y stores, and without any segment end.
        if (!big_scales && M > 16)
          for (int probe = kRingProbeNoMma; probe <= kRingLastMode; ++probe)
            for (int ring : {8, 16})
              if (ring == 8 || N % 256 == 0) variants.push_back({11, 0, 0, 0, ring, 0, 0, probe});
      } else if (!a4 && !big_scales) {
        if (M <= 16 && !g_decode) variants.insert(variants.end(), {{1, 16, 0}, {2, 0, 0}});
        else if (M <= 16) variants.push_back({1, 0, 0});
        else if (M > 16) variants.insert(variants.end(), {{1, 4, 0}, {3, 0, 0}, {3, 1, 0}, {3, 4, 0}});
      }
      if (!a4 && M <= 16 && !g_dense && !g_dense_small) variants.insert(variants.end(), {{5, 0, 0}, {6, 0, 0}, {4, 4, 1}, {4, 4, 2}});
      // Auto as a plain launch without the prefetch (the strip kernels' launch options).
      const bool chain_rows = (!a4 && !big_scales && (g_dense_small || g_dense || g_decode)) || g_dense_fp8;
      if (chain_rows && M <= 16) variants.push_back({0, 0, 0, 0, 0, -1, -1});
      // The rows' common fields (kernel, shape, M, mode, floor).
      Row base;
      base.kernel = big_scales ? "gemm_bigscale" : "gemm";
      base.shape = std::string(sh.name) + " " + std::to_string(N) + "x" + std::to_string(K);
      base.M = M;
      base.mode = mode;
      base.floor_us = floor_us(wbytes + 2.0 * M * K + 2.0 * M * N);
      for (auto [kernel, kparam, cluster, batch, ring, pdl, prefetch, mode, fp8] : variants) {
        CK(cudaMemsetAsync(y.p, 0xFF, y.n * 2, s));  // NaN poison
        GemmConfig cfg;
        cfg.kernel = kernel;
        cfg.batch_tiles = batch;
        if (kernel == 3 || kernel == 7 || kernel == 11) cfg.k_splits = kparam;
        else cfg.k_slices = kparam;
        if (kernel == 11) cfg.strips_per_cta = cluster, cfg.ring_warps = ring;
        if (kernel == 4) cfg.k_splits = cluster;
        if (kernel == 10) cfg.k_slices = 0, cfg.k_splits = kparam, cfg.strips_per_warp = cluster;
        cfg.pdl = pdl, cfg.prefetch_tiles = prefetch;
        cfg.fp8 = fp8;
        if (fp8) cfg.kernel = 0;
        // Kernel 11's modes are launched directly (not GemmConfig choices).
        // The FP8 variant quantizes raw x itself (its quantizer is bit-exact to the qdq's).
        auto gemm = [&, cfg, mode = mode](const Mxfp4DeviceWeight& w) {
          if (mode) launch_dense_ws(w, xin, M, y.p, s, 0, 0, 0, cfg.ring_warps, mode);
          else mxfp4_gemm(w, cfg.fp8 ? x.p : xin, M, y.p, s, cfg);
        };
        if (a4 && !fp8) mxfp4_qdq_activations(x.p, xq.p, M, K, s);
        gemm(weight(0));
        CK(cudaStreamSynchronize(s));
        const ErrStats err = compare(y.download(), ref.download());
        const double us = median_us(
            [&](int i) {
              if (a4 && !fp8) mxfp4_qdq_activations(x.p, xq.p, M, K, s);
              gemm(weight(i + 1));
            },
            200, s);
        Row r = base;
        r.us = us;
        r.rel_err = err.rel;
        r.nan_count = err.nan;
        if (mode) r.kernel = "gemm_probe", r.nan_count = -1, r.rel_err = -1;  // wrong sums by design: timed, not checked
        if (fp8)
          r.note = "FP8 ring (quantize+gemm)" + (ring ? " producer+" + std::to_string(ring) + " warps" : std::string(" auto warps"));
        else if (kernel == 0 && pdl < 0) r.note = "auto without PDL or prefetch, events";
        else if (kernel == 0) r.note = "auto" + std::string(a4 ? " (qdq+gemm)" : "");
        else if (kernel == 1) r.note = "v1 registers" + (kparam ? " ks=" + std::to_string(kparam) : std::string(" auto ks"));
        else if (kernel == 2) r.note = "ring" + (kparam ? " ks=" + std::to_string(kparam) : std::string(" auto ks"));
        else if (kernel == 4)
          r.note = "bulk ks=" + std::to_string(kparam) + " cluster=" + std::to_string(cluster);
        else if (kernel == 5 || kernel == 6)
          r.note = std::string(kernel == 5 ? "batched registers" : "batched registers <= 64 regs") +
                   (kparam ? " ks=" + std::to_string(kparam) : std::string(" auto ks"));
        else if (kernel == 7) r.note = "wgmma" + (kparam ? " splits=" + std::to_string(kparam) : std::string(" auto splits"));
        else if (kernel == 11)
          r.note = "ws ring" +
                   (kparam ? " splits=" + std::to_string(kparam)
                           : std::string(cluster || batch || ring ? " stream-K" : " auto plan")) +
                   (cluster ? " strips/cta=" + std::to_string(cluster) : std::string()) +
                   (batch ? " ctas/sm=" + std::to_string(batch) : std::string()) +
                   (ring ? " producer+" + std::to_string(ring) + " warps" : std::string()) +
                   (mode ? std::string(" ") + ring_mode_name(mode) : std::string());
        else if (kernel == 8) r.note = "balanced batch=" + std::to_string(batch);
        else if (kernel == 9) r.note = "strip pair ks=" + std::to_string(kparam) + " batch=" + std::to_string(batch);
        else if (kernel == 12)
          r.note = "pipelined" + (kparam ? " ks=" + std::to_string(kparam) : std::string()) +
                   " in-flight=" + std::to_string(batch);
        else if (kernel == 10)
          r.note = "streamk strips=" + std::to_string(cluster) + " batch=" + std::to_string(batch) +
                   (kparam ? " ctas/sm=" + std::to_string(kparam) : std::string());
        else r.note = "tiled" + (kparam ? " splits=" + std::to_string(kparam) : std::string(" auto splits"));
        emit(r);
      }
      // Auto inside a graph of launches (with and without PDL, prefetch windows).
      if (chain_rows) {
        // The first case is what mxfp4_gemm does by default (the scorecard's row).
        std::vector<ChainCase> cases = {chain_case("auto", 0, 0)};
        if (g_dense_fp8) {
          // W4A4: auto = the qdq then the BF16 kernels; the FP8 ring quantizes x itself.
          cases[0].label = "auto (qdq+gemm)";
          cases[0].before = [&] { mxfp4_qdq_activations(x.p, xq.p, M, K, s); };
          for (int ring : {0, 8, 16}) {
            if (ring == 16 && N % 256) continue;
            ChainCase c = chain_case("FP8 ring (quantize+gemm)" + (ring ? " producer+" + std::to_string(ring) + " warps" : std::string(" auto warps")), 0, 0);
            c.cfg.fp8 = 1;
            c.cfg.ring_warps = ring;
            c.x = x.p;
            cases.push_back(c);
          }
          // Timing probes of the FP8 kernel (auto warps, 17..64 tokens; y wrong): where its time goes.
          if (M > 16)
            for (int probe : {int(kRingProbeNoMma), int(kRingProbeCopies), int(kRingProbeNoEnds)}) {
              // Labelled "PROBE ..." first: scorecard.py's FP8 rows are the notes starting "FP8 ring ... auto warps".
              ChainCase c = chain_case(std::string(ring_mode_name(probe)) + ", FP8 ring (quantize+gemm) auto warps", 0, 0);
              c.cfg.fp8 = 1;
              c.cfg.fp8_probe = probe;
              c.x = x.p;
              c.probe = true;
              cases.push_back(c);
            }
          // Probe: the FP8 GEMM alone, on the x the stream's scratch holds (left by the FP8 cases
          // above, same tokens; in the timed rounds the other cases overwrite it: timing only).
          ChainCase probe = chain_case("PROBE FP8 ring without its quantizer, auto warps", 0, 0);
          probe.cfg.fp8 = 2;
          probe.x = x.p;
          cases.push_back(probe);
          emit_chain_rows(weight, xin, M, y, ref, base, s, cases);
        } else {
        cases.insert(cases.end(), {chain_case("auto kernel, PDL", 1, 0), chain_case("auto kernel, no PDL", -1, -1)});
        if (g_dense_small && M <= 16)
          cases.insert(cases.end(), {chain_case("auto kernel, PDL no prefetch", 1, -1),
                                     chain_case("auto kernel, PDL prefetch 4", 1, 4),
                                     chain_case("auto kernel, PDL prefetch 8", 1, 8)});
        // Kernel 9's K-slices and batches in the graph (PDL), 9..16 tokens.
        if (g_dense_small && M > 8 && N % 32 == 0)
          for (auto [ks, batch] : {std::pair{4, 1}, std::pair{4, 2}, std::pair{8, 1}, std::pair{8, 2}})
            cases.push_back(chain_case("strip pair ks=" + std::to_string(ks) + " batch=" + std::to_string(batch) +
                                           ", PDL",
                                       1, 0, 9, ks, batch));
        emit_chain_rows(weight, xin, M, y, ref, base, s, cases);
        }
      }
      // Probe (permuted_x_probe.h): kernel 9's loop on x in its B-fragment order.
      if (g_dense_small && !a4 && !big_scales && M > 8 && N % 32 == 0)
        for (int ks : {4, 8}) {
          if (K < 64 * ks) continue;
          DeviceBuffer<uint8_t> xp(permuted_x_bytes(K));
          uint4* xq4 = reinterpret_cast<uint4*>(xp.p);
          for (bool with_permute : {false, true}) {
            CK(cudaMemsetAsync(y.p, 0xFF, y.n * 2, s));  // NaN poison
            CK(cudaMemsetAsync(xp.p, 0xFF, xp.n, s));
            permute_x_for_pairs(x.p, M, K, xq4, s);
            pair_gemm_on_permuted_x(weight(0), xq4, M, y.p, ks, with_permute, s);
            CK(cudaStreamSynchronize(s));
            const ErrStats err = compare(y.download(), ref.download());
            Row r = base;
            r.us = median_us(
                [&](int i) {
                  if (with_permute) permute_x_for_pairs(x.p, M, K, xq4, s);
                  pair_gemm_on_permuted_x(weight(i + 1), xq4, M, y.p, ks, with_permute, s);
                },
                200, s);
            r.rel_err = err.rel;
            r.nan_count = err.nan;
            r.note = std::string(with_permute ? "probe permute+pair (PDL)" : "probe pair on pre-permuted x") +
                     " ks=" + std::to_string(ks);
            emit(r);
          }
        }
    }
  }
}

// A weight's bytes read once per launch, copies rotated past the L2: the
// read-only launch (--dense-small: the practical floor of one launch, what a
// GEMM launch of that weight could reach at best) and, with `probes`
// (--read-probe), the other ways of reading them (read_floor_probe.h).
void bench_read_floor(const Shape& sh, cudaStream_t s, bool probes) {
  const size_t bytes = size_t(sh.N) * sh.K / 2 + size_t(sh.N) * sh.K / 32;
  const int copies = int(std::clamp(std::ceil(240e6 / double(bytes)), 1.0, 32.0));
  DeviceBuffer<uint8_t> buf(bytes * copies);
  fill_random_bytes(buf.p, buf.n, next_seed(), s);
  auto row = [&](const char* kernel, double us, const std::string& note, std::vector<ClockWindow> windows = {}) {
    Row r;
    r.windows = std::move(windows);
    r.kernel = kernel;
    r.shape = std::string(sh.name) + " " + std::to_string(sh.N) + "x" + std::to_string(sh.K);
    r.us = us;
    r.floor_us = floor_us(double(bytes));
    r.note = note;
    emit(r);
  };
  row("read_only", time_read_only_launch(buf.p, bytes, copies, s), "one launch reading the weight bytes");
  if (probes)
    for (const ReadProbe& p : run_read_probes(buf.p, bytes, copies, s)) row("read_probe", p.us, p.label, {p.timed});
}

}  // namespace

int main(int argc, char** argv) {
  bool quick = false, profile = false, moe_prefill = false;
  bool w4a4_prefill = false;  // --w4a4-prefill: bench_w4a4_fp8.cu only
  bool moe_decode = false;    // --moe-decode: --decode's MoE rows only
  bool checks = false;        // --checks: the W4A4 quantizers, the device re-layout and PDL chains, bit-exact, only
  bool read_probe = false;    // --read-probe: ways of streaming a weight's bytes (read_floor_probe.h)
  bool mma_rates = false;     // --mma-rates: tensor-core and dequant instruction rates alone (mma_rates.h)
  std::vector<int> moe_tokens = {512, 2048, 8192};
  std::vector<int> decode_tokens = {1, 2, 8, 40};  // --moe-decode; --moe-tokens T: T only
  const char* json = nullptr;
  g_seed = uint64_t(std::chrono::high_resolution_clock::now().time_since_epoch().count()) ^
           std::random_device{}();
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--quick")) quick = true;
    else if (!std::strcmp(argv[i], "--profile")) profile = true;
    else if (!std::strcmp(argv[i], "--moe-prefill")) moe_prefill = true;
    else if (!std::strcmp(argv[i], "--w4a4-prefill")) w4a4_prefill = true;
    else if (!std::strcmp(argv[i], "--moe-tokens") && i + 1 < argc) moe_tokens = {std::atoi(argv[++i])}, decode_tokens = moe_tokens;
    else if (!std::strcmp(argv[i], "--moe-only") && i + 1 < argc) g_moe_only = argv[++i];
    else if (!std::strcmp(argv[i], "--decode")) g_decode = true;
    else if (!std::strcmp(argv[i], "--moe-decode")) g_decode = moe_decode = true;
    else if (!std::strcmp(argv[i], "--dense")) g_dense = true;
    else if (!std::strcmp(argv[i], "--dense-small")) g_dense_small = true;
    else if (!std::strcmp(argv[i], "--dense-fp8")) g_dense_fp8 = true;
    else if (!std::strcmp(argv[i], "--checks")) checks = true;
    else if (!std::strcmp(argv[i], "--read-probe")) read_probe = true;
    else if (!std::strcmp(argv[i], "--mma-rates")) mma_rates = true;
    else if (!std::strcmp(argv[i], "--json") && i + 1 < argc) json = argv[++i];
    else if (!std::strcmp(argv[i], "--seed") && i + 1 < argc) g_seed = std::stoull(argv[++i]);
    else {
      std::fprintf(stderr, "usage: mxfp4_bench [--quick] [--profile] [--moe-prefill [--moe-tokens T]] [--w4a4-prefill [--moe-tokens T]] [--decode] [--moe-decode] [--dense] [--dense-small] [--dense-fp8] [--read-probe] [--mma-rates] [--checks] [--moe-only A|B..] [--json FILE] [--seed N]\n");
      return 2;
    }
  }
  try {
    if (json) g_json = std::fopen(json, "w");
    cudaDeviceProp prop;
    CK(cudaGetDeviceProperties(&prop, 0));
    std::printf("device: %s, %d SMs, L2 %d MB, seed %llu\n", prop.name, prop.multiProcessorCount,
                prop.l2CacheSize >> 20, (unsigned long long)g_seed);
    cudaStream_t s;
    CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    if (!profile) start_clock_sampler(0);  // ncu runs take no samples beside them
    if (profile) {
      if (g_dense_small) profile_small_run(s, next_seed);
      else if (g_dense) profile_dense_run(s, next_seed);
      else if (moe_decode) profile_moe_decode_run(s, next_seed);
      else profile_run(s, next_seed);
      return 0;
    }
    measure_copy(s);
    if (w4a4_prefill) {
      mxbench::bench_w4a4_prefill(moe_tokens, g_seed, g_copy_gbps, s);
      return 0;
    }
    if (mma_rates) {
      bench_mma_rates(s);
      return 0;
    }
    if (read_probe) {
      for (const Shape& sh : {Shape{"dense_gate_up", 36864, 7168}, Shape{"dense_down", 7168, 18432}}) {
        bench_read_floor(sh, s, true);
      }
      return 0;
    }
    if (checks) {
      check_quantizer(s);
      check_device_pack(s);
      check_pdl_chain(s);
      check_dense_fp8_quantizer(s);
    } else if (moe_prefill) {
      bench_moe(moe_tokens, s, 384);
    } else if (g_dense_small) {
      bench_read_floor({"dense_gate_up", 36864, 7168}, s, false);
      bench_read_floor({"dense_down", 7168, 18432}, s, false);
      bench_dense({"dense_gate_up", 36864, 7168}, {1, 8, 12, 16}, s, false);
      bench_dense({"dense_down", 7168, 18432}, {1, 8, 12, 16}, s, false);
      bench_dense({"expert_gate_up", 4096, 7168}, {1, 16}, s, false);
      bench_dense({"expert_down", 7168, 2048}, {1, 16}, s, false);
      bench_dense({"expert_gate_up", 4096, 7168}, {1, 16}, s, true);
      bench_dense({"mla_o_proj", 7168, 8192}, {1, 16}, s, false);
      bench_dense({"mla_q_b_proj", 12288, 1536}, {1, 16}, s, false);
    } else if (g_dense_fp8) {
      check_dense_fp8_quantizer(s);
      bench_dense({"dense_gate_up", 36864, 7168}, {12, 16, 32, 64}, s, false);
      bench_dense({"dense_down", 7168, 18432}, {12, 16, 32, 64}, s, false);
      bench_dense({"expert_gate_up", 4096, 7168}, {16, 64}, s, false);
    } else if (g_dense) {
      bench_dense({"dense_gate_up", 36864, 7168}, {16, 32, 64}, s, false);
      bench_dense({"dense_down", 7168, 18432}, {16, 32, 64}, s, false);
      bench_dense({"expert_gate_up", 4096, 7168}, {16, 64}, s, false);
      bench_dense({"expert_down", 7168, 2048}, {16, 64}, s, false);
      bench_dense({"expert_gate_up", 4096, 7168}, {16, 64}, s, true);
    } else if (moe_decode) {
      bench_moe(decode_tokens, s, 384);
    } else if (g_decode) {
      bench_dense({"dense_gate_up", 36864, 7168}, {1, 8}, s, false);
      bench_dense({"dense_down", 7168, 18432}, {1, 8}, s, false);
      bench_dense({"expert_gate_up", 4096, 7168}, {1}, s, true);
      bench_moe({1, 2, 8, 40}, s, 384);
    } else {
      check_quantizer(s);
      check_device_pack(s);
      const std::vector<Shape> shapes = {{"dense_gate_up", 36864, 7168},
                                         {"dense_down", 7168, 18432},
                                         {"expert_gate_up", 4096, 7168},
                                         {"expert_down", 7168, 2048}};
      const std::vector<int> Ms = quick ? std::vector<int>{1, 64} : std::vector<int>{1, 8, 32, 64};
      for (const Shape& sh : shapes) bench_dense(sh, Ms, s, false);
      bench_dense({"expert_gate_up", 4096, 7168}, {1, 64}, s, true);
      bench_moe(quick ? std::vector<int>{1, 2, 8, 40, 8192} : std::vector<int>{1, 2, 8, 40, 512, 8192}, s, 384);
    }

    stop_clock_sampler();
    std::printf("\n| kernel | shape | M/T | mode | time us | floor us | ratio | rel err | unwritten | SM MHz | note |\n");
    std::printf("|---|---|---|---|---|---|---|---|---|---|---|\n");
    for (const Row& r : g_rows)
      std::printf("| %s | %s | %d | %s | %.2f | %.2f | %.2f | %.2e | %ld | %.0f | %s |\n", r.kernel.c_str(),
                  r.shape.c_str(), r.M, r.mode.c_str(), r.us, r.floor_us,
                  r.floor_us > 0 ? r.us / r.floor_us : 0.0, r.rel_err, r.nan_count, r.sm_mhz, r.note.c_str());
    if (g_json) std::fclose(g_json);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "mxfp4_bench: %s\n", e.what());
    return 1;
  }
  return 0;
}
