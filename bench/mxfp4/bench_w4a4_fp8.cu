// mxfp4_bench --w4a4-prefill: the W4A4 MoE prefill on FP8 tensor cores
// (src/cuda/w4a4_fp8_*.cu) beside W4A16 path 4 and W4A4 on BF16 (qdq) in the
// same call, Kimi-K2.5 layer shape, with
//   * the FP8 quantizer bit-exact against the host reference (codes, scales,
//     row maximum, folded E4M3 bytes in the MMA's K order), random and
//     adversarial blocks, out of place and in place;
//   * accuracy of the FP8 path against an FP32 reference of the W4A4
//     contract (qdq x, dequantized W, qdq of h before down) and against the
//     W4A16 reference (the quantization error of W4A4 itself), on random x
//     and on x with outlier channels (some rows far beyond the fold's exact
//     window: those blocks are counted);
//   * time (events, median) and TFLOP/s.
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdarg>
#include <cstdio>
#include <numeric>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include "bench_w4a4_fp8.h"
#include "core/dtype.h"
#include "cuda/host/fp8_fold.h"
#include "cuda/host/mxfp4_reference.h"
#include "cuda/mxfp4_kernels.h"
#include "cuda/w4a4_fp8.h"
#include "host_layout.h"
#include "reference_kernels.cuh"
#include "timing.h"
#include "device_buffer.h"
#include "moe_weights.h"

namespace mxbench {

namespace {

using namespace mx::cuda;

uint64_t g_state = 0;
uint64_t seed() { return g_state = g_state * 6364136223846793005ull + 1442695040888963407ull; }

std::vector<std::string> g_table;
void row(const char* fmt, ...) __attribute__((format(printf, 1, 2)));
void row(const char* fmt, ...) {
  char buf[1024];
  va_list ap;
  va_start(ap, fmt);
  std::vsnprintf(buf, sizeof buf, fmt, ap);
  va_end(ap);
  std::printf("%s\n", buf);
  std::fflush(stdout);
  g_table.push_back(buf);
}

// Host expectation of w4a4_fp8_quantize_rows for one row: mismatching bytes
// (codes in MMA order, scales, the smax byte).
long check_quantized_row(const uint16_t* x, int K, const uint8_t* q, const uint8_t* scales) {
  std::vector<QuantizedBlock> blocks(K / 32);
  int smax = 0;
  for (int b = 0; b < K / 32; ++b) {
    blocks[b] = quantize_block_reference(x + size_t(b) * 32);
    smax = std::max(smax, int(blocks[b].scale));
  }
  long bad = q[K] != smax;
  for (int b = 0; b < K / 32; ++b) {
    if (scales) bad += scales[b] != blocks[b].scale;
    for (int i = 0; i < 32; ++i) {
      const int k = b * 32 + i;
      const uint8_t want = fold_code_reference(blocks[b].codes[i], blocks[b].scale - smax);
      bad += q[(k & ~63) + fp8_logical_col(k & 63)] != want;
    }
  }
  return bad;
}

// Random rows with exponents spread over 2^-20..2^20, then adversarial blocks
// (all equal, one outlier, subnormal range, E2M1 midpoints, zeros) and rows
// with one block 2^20 above the rest (the others fold beyond the window).
std::vector<uint16_t> quantizer_input(int M, int K) {
  std::vector<uint16_t> x = quantizer_check_input(M, K, seed(), 96);
  std::mt19937_64 rng(seed());
  std::normal_distribution<float> nd(0.f, 1.f);
  for (int r = M - 4; r < M; ++r) {
    for (int k = 0; k < K; ++k) x[size_t(r) * K + k] = mx::f32_to_bf16(nd(rng));
    x[size_t(r) * K + 40] = mx::f32_to_bf16(std::ldexp(1.f, 20));
  }
  return x;
}

void check_quantizer(cudaStream_t s) {
  for (int K : {7168, 2048}) {
    const int M = 64;
    const std::vector<uint16_t> x = quantizer_input(M, K);
    DeviceBuffer<uint16_t> dx(x.size());
    DeviceBuffer<uint8_t> q(size_t(M) * 2 * K), sc(size_t(M) * K / 32);
    dx.upload(x);
    CK(cudaMemsetAsync(q.p, 0xFF, q.n, s));
    CK(cudaMemsetAsync(sc.p, 0xFF, sc.n, s));
    w4a4_fp8_quantize_rows(dx.p, M, K, q.p, 2 * int64_t(K), sc.p, s);
    const std::vector<uint8_t> hq = q.download(), hs = sc.download();
    long bad = 0;
    for (int r = 0; r < M; ++r)
      bad += check_quantized_row(&x[size_t(r) * K], K, &hq[size_t(r) * 2 * K], &hs[size_t(r) * K / 32]);
    // In place, as the MoE does with h.
    w4a4_fp8_quantize_rows(dx.p, M, K, reinterpret_cast<uint8_t*>(dx.p), 2 * int64_t(K), nullptr, s);
    const std::vector<uint16_t> inplace = dx.download();
    const uint8_t* ip = reinterpret_cast<const uint8_t*>(inplace.data());
    long bad_in_place = 0;
    for (int r = 0; r < M; ++r)
      bad_in_place += check_quantized_row(&x[size_t(r) * K], K, ip + size_t(r) * 2 * K, nullptr);
    row("| w4a4_fp8_quantizer | 64x%d | bit-exact vs host reference | mismatching bytes: %ld out of place, %ld in place | %s |",
        K, bad, bad_in_place, bad || bad_in_place ? "MISMATCH" : "bit-exact");
  }
}

__global__ void outlier_kernel(uint16_t* x, int T, int H) {
  const int t = blockIdx.x * blockDim.x + threadIdx.x;
  if (t >= T) return;
  auto scale = [&](int c, float f) {
    uint16_t& v = x[size_t(t) * H + c];
    v = uint16_t(__float_as_uint(__uint_as_float(uint32_t(v) << 16) * f) >> 16);
  };
  // Two outlier channels in every token (2^8), and every 64th token one value
  // 2^16 larger, which puts the token's other blocks ~16 binades under its
  // maximum: beyond the fold's exact window (d >= -14).
  scale(17, 256.f);
  scale(3001, 256.f);
  if (t % 64 == 0) scale(5000, 65536.f);
}

struct MoeSetup {
  int E = 384, H = 7168, I = 2048, topk = 8;
};

}  // namespace

void bench_w4a4_prefill(const std::vector<int>& tokens, uint64_t seed0, double copy_gbps,
                        cudaStream_t s) {
  g_state = seed0 ^ 0x5851F42D4C957F2Dull;
  std::printf("w4a4-prefill: seed %llu, copy bandwidth %.1f GB/s\n", (unsigned long long)seed0, copy_gbps);
  g_table.push_back("| what | shape | variant | time / error | note |");
  g_table.push_back("|---|---|---|---|---|");
  check_quantizer(s);
  MoeSetup m;
  const int E = m.E, H = m.H, I = m.I, topk = m.topk;
  const BenchMoeWeights mw(E, H, I, [] { return seed(); }, s);
  const MoeWeights& w = mw.w;
  std::mt19937_64 rng(seed());
  for (int T : tokens) {
    const int sets = 2;
    const RandomRouting routing(sets, T, topk, E, rng);
    const std::vector<int>& ids = routing.ids;
    const std::vector<float>& wts = routing.weights;
    DeviceBuffer<int> dids(ids.size());
    DeviceBuffer<float> dw(wts.size());
    dids.upload(ids);
    dw.upload(wts);
    DeviceBuffer<uint16_t> x(size_t(sets) * T * H), xo(size_t(T) * H);
    fill_random_bf16(x.p, x.n, seed(), 1.0f, s);
    CK(cudaMemcpyAsync(xo.p, x.p, xo.n * 2, cudaMemcpyDeviceToDevice, s));
    outlier_kernel<<<(T + 255) / 256, 256, 0, s>>>(xo.p, T, H);
    CK(cudaGetLastError());
    DeviceBuffer<float> out(size_t(sets) * T * H);
    const size_t ws_bytes = fused_moe_workspace_bytes(w, T, topk);
    DeviceBuffer<uint8_t> ws(ws_bytes * sets);
    const double flops = 6.0 * T * topk * double(H) * I;
    std::vector<int> check;
    for (int t = 0; t < T; t += std::max(1, T / 32)) check.push_back(t);
    // Outlier rows beyond the window: include a t % 64 == 0 token.
    // References (double accumulation over FP32 per-expert outputs) for
    // set 0's tokens in `check`: W4A4 contract and W4A16.
    auto reference = [&](const uint16_t* xin, bool w4a4) {
      std::vector<double> ref(check.size() * size_t(H), 0.0);
      DeviceBuffer<float> gu(2 * I), y(H);
      DeviceBuffer<uint16_t> xq(H), h(I);
      for (size_t ci = 0; ci < check.size(); ++ci) {
        const int t = check[ci];
        const uint16_t* xt = xin + size_t(t) * H;
        if (w4a4) {
          mxfp4_qdq_activations(xt, xq.p, 1, H, s);
          xt = xq.p;
        }
        for (int k = 0; k < topk; ++k) {
          const int e = ids[size_t(t) * topk + k];
          reference_linear(mw.r13c.p + e * mw.c13, mw.r13s.p + e * mw.s13, 2 * I, H, xt, 1, gu.p, s);
          reference_silu_mul(gu.p, I, h.p, s);
          if (w4a4) mxfp4_qdq_activations(h.p, h.p, 1, I, s);
          reference_linear(mw.r2c.p + e * mw.c2, mw.r2s.p + e * mw.s2, H, I, h.p, 1, y.p, s);
          const std::vector<float> hy = y.download();
          for (int n = 0; n < H; ++n) ref[ci * H + n] += double(wts[size_t(t) * topk + k]) * hy[n];
        }
      }
      return ref;
    };
    auto rel = [&](const std::vector<float>& got, const std::vector<double>& ref) {
      double num = 0, den = 0;
      for (size_t ci = 0; ci < check.size(); ++ci)
        for (int n = 0; n < H; ++n) {
          const double o = got[size_t(check[ci]) * H + n], r = ref[ci * H + n];
          num += (o - r) * (o - r);
          den += r * r;
        }
      return std::sqrt(num / std::max(den, 1e-300));
    };
    struct Variant {
      const char* label;
      bool w4a4;
      int path, mma;
    };
    const Variant variants[] = {{"W4A4 FP8 wgmma, FP32 every 128 K (w4a4_mma 2)", true, 4, 2},
                                {"W4A4 FP8 wgmma, FP32 every 256 K (w4a4_mma 3)", true, 4, 3},
                                {"W4A16 path 4 (wgmma BF16)", false, 4, 0},
                                {"W4A16 auto", false, 0, 0},
                                {"W4A4 BF16 qdq, path 4", true, 4, 1}};
    {  // The two quantizer launches of the FP8 path alone (x, and h in place).
      DeviceBuffer<uint8_t> q(size_t(T) * 2 * H);
      DeviceBuffer<uint16_t> h(size_t(T) * topk * I);
      fill_random_bf16(h.p, h.n, seed(), 1.0f, s);
      const double ux = median_us([&](int) { w4a4_fp8_quantize_rows(x.p, T, H, q.p, 2 * int64_t(H), nullptr, s); }, 20, s);
      const double uh = median_us([&](int) {
        w4a4_fp8_quantize_rows(h.p, T * topk, I, reinterpret_cast<uint8_t*>(h.p), 2 * int64_t(I), nullptr, s);
      }, 20, s);
      const double bytes_x = 3.0 * T * H, bytes_h = 3.0 * T * topk * I;  // read BF16, write E4M3
      row("| w4a4_fp8_quantize_rows | T=%d | x [%d, %d] / h [%d, %d] in place | %.1f us / %.1f us | %.0f%% / %.0f%% of copy bandwidth |",
          T, T, H, T * topk, I, ux, uh, 100.0 * bytes_x / ux / 1e3 / copy_gbps, 100.0 * bytes_h / uh / 1e3 / copy_gbps);
    }
    for (const uint16_t* xin : {static_cast<const uint16_t*>(x.p), static_cast<const uint16_t*>(xo.p)}) {
      const bool outliers = xin == xo.p;
      const std::vector<double> ref4 = reference(xin, true), ref16 = reference(xin, false);
      if (outliers) {  // blocks of x beyond the exact window
        DeviceBuffer<uint8_t> q(size_t(T) * 2 * H), sc(size_t(T) * H / 32);
        w4a4_fp8_quantize_rows(xin, T, H, q.p, 2 * int64_t(H), sc.p, s);
        const std::vector<uint8_t> hq = q.download(), hs = sc.download();
        long beyond = 0, rows_beyond = 0;
        for (int t = 0; t < T; ++t) {
          const int smax = hq[size_t(t) * 2 * H + H];
          long n = 0;
          for (int b = 0; b < H / 32; ++b) n += hs[size_t(t) * H / 32 + b] - smax < kFp8FoldMinExactDelta;
          beyond += n;
          rows_beyond += n > 0;
        }
        row("| x blocks beyond the exact window (d < -14) | T=%d outliers | FP8 quantizer | %ld of %ld blocks, in %ld of %d tokens | rounded RNE |",
            T, beyond, long(T) * H / 32, rows_beyond, T);
      }
      for (const Variant& v : variants) {
        if (outliers && !v.w4a4) continue;
        MoeWeights wv = w;
        wv.w4a4 = v.w4a4;
        MoeConfig cfg;
        cfg.path = v.path;
        cfg.w4a4_mma = v.mma;
        auto step = [&](int st, const uint16_t* xs) {
          fused_moe_decode(wv, xs, dids.p + size_t(st) * T * topk, dw.p + size_t(st) * T * topk, T,
                           topk, out.p + size_t(st) * T * H, ws.p + ws_bytes * st, s, cfg);
        };
        CK(cudaMemsetAsync(out.p, 0xFF, out.n * 4, s));
        CK(cudaMemsetAsync(ws.p, 0xFF, ws.n, s));
        step(0, xin);
        const std::vector<float> got = out.download();
        long nan = 0;
        for (size_t i = 0; i < size_t(T) * H; ++i) nan += std::isnan(got[i]);
        const double e4 = rel(got, ref4), e16 = rel(got, ref16);
        if (outliers) {
          row("| fused_moe W4A4 accuracy, outlier x | T=%d | %s | rel err vs W4A4 FP32 ref %.3e, vs W4A16 ref %.3e | NaN %ld of %zu |",
              T, v.label, e4, e16, nan, size_t(T) * H);
          continue;
        }
        const double us = median_us([&](int i) { step(i % sets, x.p + size_t(i % sets) * T * H); }, 20, s);
        row("| fused_moe | T=%d | %s | %.1f us = %.0f TFLOP/s | rel err vs W4A4 FP32 ref %.3e, vs W4A16 ref %.3e; NaN %ld |",
            T, v.label, us, flops / us / 1e6, e4, e16, nan);
      }
    }
  }
  std::printf("\n");
  for (const std::string& l : g_table) std::printf("%s\n", l.c_str());
}

}  // namespace mxbench
