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
// Usage: mxfp4_bench [--quick] [--profile] [--moe-prefill [--moe-tokens T]] [--decode] [--moe-decode] [--dense] [--dense-small] [--read-probe] [--json FILE] [--seed N]
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
#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <numeric>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include "core/dtype.h"
#include "cuda/host/mxfp4_reference.h"
#include "cuda/mxfp4_kernels.h"
#include "host_layout.h"
#include "reference_kernels.cuh"
#include "timing.h"
#include "device_buffer.h"
#include "moe_weights.h"
#include "bench_w4a4_fp8.h"
#include "moe_phases.h"
#include "permuted_x_probe.h"
#include "read_floor_probe.h"
#include "profile_runs.h"

namespace {

using namespace mx::cuda;
using namespace mxbench;

#define CK(x) check_cuda_call((x), #x)

struct Row {  // one result line
  std::string kernel, shape, mode, note;
  int M = 0;
  double us = 0, floor_us = 0, rel_err = -1;
  long nan_count = -1;
  double extra = 0;  // MoE: touched experts
};
std::vector<Row> g_rows;
std::FILE* g_json = nullptr;
bool g_decode = false;  // --decode
bool g_dense = false;   // --dense
bool g_dense_small = false;  // --dense-small
// --moe-only A|B|..: the fused-MoE rows whose label contains one of the
// '|'-separated parts, the others skipped (a few kernels under ncu without
// the rest of the table).
const char* g_moe_only = nullptr;

bool moe_row_selected(const char* label) {
  if (!g_moe_only) return true;
  const std::string only = g_moe_only;
  for (size_t b = 0, e; b <= only.size(); b = e + 1) {
    e = only.find('|', b);
    if (e == std::string::npos) e = only.size();
    if (e > b && std::strstr(label, only.substr(b, e - b).c_str())) return true;
  }
  return false;
}

void emit(const Row& r) {
  g_rows.push_back(r);
  char buf[1024];
  std::snprintf(buf, sizeof buf,
                "{\"kernel\":\"%s\",\"shape\":\"%s\",\"M\":%d,\"mode\":\"%s\",\"us\":%.3f,"
                "\"floor_us\":%.3f,\"ratio\":%.3f,\"rel_err\":%.3g,\"unwritten\":%ld,\"touched\":%.1f,"
                "\"note\":\"%s\"}",
                r.kernel.c_str(), r.shape.c_str(), r.M, r.mode.c_str(), r.us, r.floor_us,
                r.floor_us > 0 ? r.us / r.floor_us : 0.0, r.rel_err, r.nan_count, r.extra, r.note.c_str());
  std::printf("%s\n", buf);
  std::fflush(stdout);
  if (g_json) std::fprintf(g_json, "%s\n", buf), std::fflush(g_json);
}

double g_copy_gbps = 0;

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

double floor_us(double bytes) { return bytes / (g_copy_gbps * 1e3); }

// --dense-small: the practical floor of one launch that only reads a weight's
// bytes once (16-byte loads that skip L1, 4 in flight per thread, 2048 threads
// per SM), timed like the GEMMs: events around each launch, copies rotated past
// the L2. What a GEMM launch of that weight could reach at best.
__global__ void read_only_kernel(const uint4* __restrict__ p, size_t n, uint32_t* out) {
  const size_t stride = size_t(gridDim.x) * blockDim.x;
  size_t i = size_t(blockIdx.x) * blockDim.x + threadIdx.x;
  uint32_t acc = 0;
  auto load = [](const uint4* q) {
    uint4 v;
    asm volatile("ld.global.nc.L1::no_allocate.v4.u32 {%0,%1,%2,%3}, [%4];"
                 : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w) : "l"(q));
    return v.x ^ v.y ^ v.z ^ v.w;
  };
  for (; i + 3 * stride < n; i += 4 * stride) {
    uint32_t v[4];
#pragma unroll
    for (int k = 0; k < 4; ++k) v[k] = load(p + i + k * stride);
    acc ^= v[0] ^ v[1] ^ v[2] ^ v[3];
  }
  for (; i < n; i += stride) acc ^= load(p + i);
  if (acc == 0x9E3779B9u) out[blockIdx.x] = acc;  // depends on the data: the loads stay
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

uint64_t g_seed = 0;
uint64_t next_seed() { return g_seed = g_seed * 6364136223846793005ull + 1442695040888963407ull; }

// The W4A4 quantizer on the GPU against the host reference, bit for bit, on
// random and adversarial blocks.
void check_quantizer(cudaStream_t s) {
  const int M = 64, K = 7168;
  const std::vector<uint16_t> x = quantizer_check_input(M, K, next_seed(), 64);
  DeviceBuffer<uint16_t> dx(x.size()), dq(x.size());
  CK(cudaMemcpy(dx.p, x.data(), x.size() * 2, cudaMemcpyHostToDevice));
  CK(cudaMemset(dq.p, 0xFF, x.size() * 2));
  mxfp4_qdq_activations(dx.p, dq.p, M, K, s);
  CK(cudaStreamSynchronize(s));
  std::vector<uint16_t> got = dq.download(), want(x.size());
  for (size_t b = 0; b < x.size() / 32; ++b) qdq_block_reference(x.data() + b * 32, want.data() + b * 32);
  long diff = 0;
  for (size_t i = 0; i < x.size(); ++i) diff += got[i] != want[i];
  Row r;
  r.kernel = "w4a4_quantizer";
  r.shape = "64x7168";
  r.M = M;
  r.mode = "bitexact";
  r.nan_count = diff;
  r.note = diff == 0 ? "bit-exact" : "MISMATCH";
  emit(r);
  if (diff) std::printf("QUANTIZER MISMATCH: %ld of %zu values differ\n", diff, x.size());
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
  Row r;
  r.kernel = "device_pack";
  r.shape = "7168x2048";
  r.mode = "vs_host";
  r.nan_count = same ? 0 : 1;
  r.note = same ? "identical" : "MISMATCH";
  emit(r);
}

void bench_dense(const Shape& sh, const std::vector<int>& Ms, cudaStream_t s, bool big_scales) {
  const int N = sh.N, K = sh.K;
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
  auto weight = [&](int c) {
    Mxfp4DeviceWeight w;
    w.codes = pc.p + size_t(c % copies) * cb;
    w.scales = ps.p + size_t(c % copies) * sb;
    w.rows = N;
    w.cols = K;
    w.big_scales = big_scales;
    return w;
  };
  for (int M : Ms) {
    DeviceBuffer<uint16_t> x(size_t(M) * K), xq(size_t(M) * K), y(size_t(M) * N);
    DeviceBuffer<float> ref(size_t(M) * N);
    fill_random_bf16(x.p, x.n, next_seed(), 1.0f, s);
    const std::vector<const char*> modes = g_decode || g_dense || g_dense_small ? std::vector<const char*>{"W4A16"}
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
      };
      std::vector<GemmVariant> variants = {{0, 0, 0}};
      if (g_dense_small) {
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
        }
        // A producer warp filling the ring: 8 consumer warps (2 CTAs per SM)
        // or 16 (1 CTA per SM, each activation stage shared by 256 rows).
        for (int ring : {8, 16})
          if (ring == 8 || N % 256 == 0) variants.push_back({11, 0, 0, 0, ring});
      } else if (!a4 && !big_scales) {
        if (M <= 16 && !g_decode) variants.insert(variants.end(), {{1, 16, 0}, {2, 0, 0}});
        else if (M <= 16) variants.push_back({1, 0, 0});
        else if (M > 16) variants.insert(variants.end(), {{1, 4, 0}, {3, 0, 0}, {3, 1, 0}, {3, 4, 0}});
      }
      if (!a4 && M <= 16 && !g_dense && !g_dense_small) variants.insert(variants.end(), {{5, 0, 0}, {6, 0, 0}, {4, 4, 1}, {4, 4, 2}});
      for (auto [kernel, kparam, cluster, batch, ring] : variants) {
        CK(cudaMemsetAsync(y.p, 0xFF, y.n * 2, s));  // NaN poison
        GemmConfig cfg;
        cfg.kernel = kernel;
        cfg.batch_tiles = batch;
        if (kernel == 3 || kernel == 7 || kernel == 11) cfg.k_splits = kparam;
        else cfg.k_slices = kparam;
        if (kernel == 11) cfg.strips_per_cta = cluster, cfg.ring_warps = ring;
        if (kernel == 4) cfg.k_splits = cluster;
        if (kernel == 10) cfg.k_slices = 0, cfg.k_splits = kparam, cfg.strips_per_warp = cluster;
        if (a4) mxfp4_qdq_activations(x.p, xq.p, M, K, s);
        mxfp4_gemm(weight(0), xin, M, y.p, s, cfg);
        CK(cudaStreamSynchronize(s));
        const ErrStats err = compare(y.download(), ref.download());
        const double us = median_us(
            [&](int i) {
              if (a4) mxfp4_qdq_activations(x.p, xq.p, M, K, s);
              mxfp4_gemm(weight(i + 1), xin, M, y.p, s, cfg);
            },
            200, s);
        Row r;
        r.kernel = big_scales ? "gemm_bigscale" : "gemm";
        r.shape = std::string(sh.name) + " " + std::to_string(N) + "x" + std::to_string(K);
        r.M = M;
        r.mode = mode;
        r.us = us;
        r.floor_us = floor_us(wbytes + 2.0 * M * K + 2.0 * M * N);
        r.rel_err = err.rel;
        r.nan_count = err.nan;
        if (kernel == 0) r.note = "auto" + std::string(a4 ? " (qdq+gemm)" : "");
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
                   (ring ? " producer+" + std::to_string(ring) + " warps" : std::string());
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
            Row r;
            r.us = median_us(
                [&](int i) {
                  if (with_permute) permute_x_for_pairs(x.p, M, K, xq4, s);
                  pair_gemm_on_permuted_x(weight(i + 1), xq4, M, y.p, ks, with_permute, s);
                },
                200, s);
            r.kernel = "gemm";
            r.shape = std::string(sh.name) + " " + std::to_string(N) + "x" + std::to_string(K);
            r.M = M;
            r.mode = mode;
            r.floor_us = floor_us(wbytes + 2.0 * M * K + 2.0 * M * N);
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

void bench_read_floor(const Shape& sh, cudaStream_t s) {
  const size_t bytes = size_t(sh.N) * sh.K / 2 + size_t(sh.N) * sh.K / 32;
  const size_t n = bytes / 16;
  const int copies = int(std::clamp(std::ceil(240e6 / double(bytes)), 1.0, 32.0));
  DeviceBuffer<uint8_t> buf(n * 16 * copies);
  DeviceBuffer<uint32_t> out(4096);
  fill_random_bytes(buf.p, buf.n, next_seed(), s);
  int sms = 0;
  CK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
  const double us = median_us(
      [&](int i) {
        const uint4* p = reinterpret_cast<const uint4*>(buf.p) + size_t(i % copies) * n;
        read_only_kernel<<<sms * 8, 256, 0, s>>>(p, n, out.p);
      },
      200, s);
  CK(cudaGetLastError());
  Row r;
  r.kernel = "read_only";
  r.shape = std::string(sh.name) + " " + std::to_string(sh.N) + "x" + std::to_string(sh.K);
  r.us = us;
  r.floor_us = floor_us(double(bytes));
  r.note = "one launch reading the weight bytes";
  emit(r);
}

// --read-probe: other ways of reading the same bytes (read_floor_probe.h).
void bench_read_probes(const Shape& sh, cudaStream_t s) {
  const size_t bytes = size_t(sh.N) * sh.K / 2 + size_t(sh.N) * sh.K / 32;
  const int copies = int(std::clamp(std::ceil(240e6 / double(bytes)), 1.0, 32.0));
  DeviceBuffer<uint8_t> buf(bytes * copies);
  fill_random_bytes(buf.p, buf.n, next_seed(), s);
  for (const mxbench::ReadProbe& p : mxbench::run_read_probes(buf.p, bytes, copies, s)) {
    Row r;
    r.kernel = "read_probe";
    r.shape = std::string(sh.name) + " " + std::to_string(sh.N) + "x" + std::to_string(sh.K);
    r.us = p.us;
    r.floor_us = floor_us(double(bytes));
    r.note = p.label;
    emit(r);
  }
}

// Fused MoE, Kimi-K2.5 layer shape.
void bench_moe(const std::vector<int>& Ts, cudaStream_t s, int E) {
  const int H = 7168, I = 2048, topk = 8;
  const BenchMoeWeights mw(E, H, I, [] { return next_seed(); }, s);
  const MoeWeights& w = mw.w;
  std::mt19937_64 rng(next_seed());
  for (int T : Ts) {
    // Routing sets (rotated while timing): distinct experts per token, positive
    // weights summing to 1. Prefill sizes use 2 sets (their weights exceed L2
    // anyway).
    const int sets = T >= 512 ? 2 : 8;
    const RandomRouting routing(sets, T, topk, E, rng);
    const std::vector<int>& ids = routing.ids;
    const std::vector<float>& wts = routing.weights;
    const std::vector<double>& touched = routing.experts_touched;
    DeviceBuffer<int> dids(ids.size());
    DeviceBuffer<float> dw(wts.size());
    CK(cudaMemcpy(dids.p, ids.data(), ids.size() * 4, cudaMemcpyHostToDevice));
    CK(cudaMemcpy(dw.p, wts.data(), wts.size() * 4, cudaMemcpyHostToDevice));
    DeviceBuffer<uint16_t> x(size_t(sets) * T * H);
    fill_random_bf16(x.p, x.n, next_seed(), 1.0f, s);
    // x quantize-dequantized per 32, for the W4A4 rows whose caller did it.
    DeviceBuffer<uint16_t> xq(x.n);
    mxfp4_qdq_activations(x.p, xq.p, sets * T, H, s);
    DeviceBuffer<float> out(size_t(sets) * T * H);
    const size_t ws_bytes = fused_moe_workspace_bytes(w, T, topk);
    DeviceBuffer<uint8_t> ws(ws_bytes * sets);
    // Reference on set 0 for every token, or for 32 evenly spaced tokens when
    // T > 40 (each reference pair is three launches).
    std::vector<int> check_tokens;
    for (int t = 0; t < T; ++t)
      if (T <= 40 || t % (T / 32) == 0) check_tokens.push_back(t);
    // ref4: the W4A4 contract (x and h quantize-dequantized per 32 by the
    // quantizer that check_quantizer proves bit-exact to the host reference).
    std::vector<double> ref(check_tokens.size() * size_t(H), 0.0), ref4(ref.size(), 0.0);
    {
      DeviceBuffer<float> gu(2 * I), y(H);
      DeviceBuffer<uint16_t> h(I), xq(H);
      std::vector<float> hy;
      for (size_t ci = 0; ci < check_tokens.size(); ++ci) {
        const int t = check_tokens[ci];
        mxfp4_qdq_activations(x.p + size_t(t) * H, xq.p, 1, H, s);
        for (int k = 0; k < topk; ++k) {
          const int e = ids[size_t(t) * topk + k];
          for (int q = 0; q < 2; ++q) {
            reference_linear(mw.r13c.p + e * mw.c13, mw.r13s.p + e * mw.s13, 2 * I, H, q ? xq.p : x.p + size_t(t) * H, 1, gu.p, s);
            reference_silu_mul(gu.p, I, h.p, s);
            if (q) mxfp4_qdq_activations(h.p, h.p, 1, I, s);
            reference_linear(mw.r2c.p + e * mw.c2, mw.r2s.p + e * mw.s2, H, I, h.p, 1, y.p, s);
            hy = y.download();
            std::vector<double>& rq = q ? ref4 : ref;
            for (int n = 0; n < H; ++n) rq[ci * H + n] += double(wts[size_t(t) * topk + k]) * hy[n];
          }
        }
      }
    }
    const double avg_touched = std::accumulate(touched.begin(), touched.end(), 0.0) / sets;
    const double bytes = avg_touched * 3.0 * H * I * 0.53125 + 2.0 * T * H + 4.0 * T * H;
    const double flops = 6.0 * T * topk * double(H) * I;
    const int iters = T >= 512 ? 20 : 200;
    // MoeConfig fields per variant; all 0 = auto (also timed as a CUDA graph).
    struct Variant {
      const char* label;
      int path, down_ks, loads, pdl;
      bool w4a4 = false;  // MoeWeights::w4a4: checked against ref4
      int ws_down = 0;    // MoeConfig::ws_down_epilogue (path 5)
      int ws_depth = 0;    // MoeConfig::ws_gate_up_depth (path 5)
      int gate_up_ks = 0;  // MoeConfig::gate_up_k_slices
      bool x_pre = false;  // W4A4: x quantized by the caller (MoeConfig::x_quantized), as CudaOps does
      int ws_ctas = 0;     // MoeConfig::ws_ctas (path 5)
      int ws_dequant = 0;  // MoeConfig::ws_dequant (path 5)
      int ws_items = 0;    // MoeConfig::ws_gate_up_items (path 5)
    };
    std::vector<Variant> variants = {{"auto", 0, 0, 0, 0}, {"auto", 0, 0, 0, 0, true}};
    // Decode variants with named fields (others append fields to Variant).
    auto variant = [](const char* label, int path, int down_ks, int loads, int pdl, bool w4a4 = false,
                      int gate_up_ks = 0, bool x_pre = false) {
      Variant v{label, path, down_ks, loads, pdl};
      v.w4a4 = w4a4;
      v.gate_up_ks = gate_up_ks;
      v.x_pre = x_pre;
      return v;
    };
    // The rule before the wide kernels (2026-11-30): direct + PDL with 3-tile
    // batches at 1 token, direct + PDL with register loads at 2, routed above.
    const Variant before = T == 1   ? variant("before: direct, batched <= 64 regs, PDL", 2, 0, 5, 1)
                           : T == 2 ? variant("before: direct, registers, PDL", 2, 0, 1, 1)
                                    : variant("before: routed, registers", 1, 0, 1, 2);
    if (T <= 40) {
      variants.push_back(before);
      Variant b4 = before;
      b4.w4a4 = true;
      variants.push_back(b4);
      b4.x_pre = true;
      b4.label = T == 1 ? "before: direct, batched <= 64 regs, PDL, x quantized by the caller"
                 : T == 2 ? "before: direct, registers, PDL, x quantized by the caller"
                          : "before: routed, registers, x quantized by the caller";
      variants.push_back(b4);
    }
    if (T <= 8) {
      variants.push_back(variant("direct, wide, PDL", 2, 0, 6, 1));
      variants.push_back(variant("direct, wide, PDL", 2, 0, 6, 1, true));
      variants.push_back(variant("direct, wide, PDL, x quantized by the caller", 2, 0, 6, 1, true, 0, true));
    }
    if (T == 1) {
      variants.push_back(variant("direct, wide, PDL, gate_up ks=4", 2, 0, 6, 1, false, 4));
      variants.push_back(variant("direct, wide, PDL, gate_up ks=1", 2, 0, 6, 1, false, 1));
      variants.push_back(variant("direct, wide, PDL, down ks=4", 2, 4, 6, 1));
      variants.push_back(variant("direct, wide, PDL, down ks=1", 2, 1, 6, 1));
      variants.push_back(variant("direct, wide, no PDL", 2, 0, 6, 2));
    }
    if (T == 2) variants.push_back(variant("direct, wide, PDL, gate_up ks=2", 2, 0, 6, 1, false, 2));
    if (T == 2) variants.push_back(variant("direct, wide, PDL, down ks=4", 2, 4, 6, 1));
    if (T == 8 || T == 40) {
      variants.push_back(variant("routed, wide", 1, 0, 6, 2));
      variants.push_back(variant("routed, wide, PDL", 1, 0, 6, 1));
      variants.push_back(variant("routed, wide", 1, 0, 6, 2, true));
    }
    if (T <= 40) variants.push_back({"routed, registers, PDL", 1, 0, 1, 1});
    if (T <= 8) variants.push_back({"direct, registers", 2, 0, 1, 2});
    if (T <= 8) variants.push_back({"direct, registers, PDL", 2, 0, 1, 1});
    if ((T == 1 || T == 40) && !g_decode) variants.push_back({"routed, ring, PDL", 1, 0, 2, 1});
    // Bulk rings (74-80 us at 1 token, 2026-11-30): not in --decode any more.
    if (T <= 8 && !g_decode) variants.push_back({"direct, bulk, PDL", 2, 0, 3, 1});
    if (T <= 8 && !g_decode) variants.push_back({"direct, bulk, PDL, down ks=1", 2, 1, 3, 1});
    if (T <= 8) variants.push_back({"direct, batched registers, PDL", 2, 0, 4, 1});
    if (T <= 8) variants.push_back({"direct, batched registers, PDL, down ks=1", 2, 1, 4, 1});
    if (T <= 8) variants.push_back({"direct, batched <= 64 regs, PDL", 2, 0, 5, 1});
    if (T == 8 || T == 40) variants.push_back({"routed, batched registers", 1, 0, 4, 2});
    if (T == 40 && !g_decode) variants.push_back({"routed, bulk, PDL", 1, 0, 3, 1});
    if (T == 512 || T == 2048) variants.push_back({"routed, registers", 1, 0, 1, 2});
    if (T >= 512) variants.push_back({"prefill tiles, mma.sync", 3, 0, 0, 0});
    if (T >= 512) variants.push_back({"prefill on wgmma, wide tiles", 4, 0, 0, 0});
    if (T >= 512) variants.push_back({"prefill on wgmma, warp-specialized", 5, 0, 0, 0});
    // Path 5's gate_up pipeline depth x down epilogue (MoeConfig::ws_gate_up_depth,
    // ws_down_epilogue); (1, 1) is path 5 as of 2026-11-30.
    for (int depth : {1, 2})
      for (int down : {1, 2, 3})
        for (bool w4a4 : {false, true}) {
          if (T < 512 || (w4a4 && (T < 2048 || depth != down)) || (down == 3 && depth == 1)) continue;
          static const char* const labels[2][3] = {
              {"warp-specialized, gate_up wait_group 1, down atomics (2026-11-30)",
               "warp-specialized, gate_up wait_group 1, down deferred", ""},
              {"warp-specialized, gate_up wait_group 2, down atomics",
               "warp-specialized, gate_up wait_group 2, down deferred",
               "warp-specialized, gate_up wait_group 2, down 3/4 deferred, 5 stages"}};
          Variant v{labels[depth - 1][down - 1], 5, 0, 0, 0, w4a4, down};
          v.ws_depth = depth;
          v.ws_items = 1;  // the 256-row items these settings belong to
          variants.push_back(v);
        }
    // Path 5 with a dequant warpgroup feeding SS wgmma (MoeConfig::ws_dequant):
    // gate_up only (2), both GEMMs with down's first 8 steps deferred (3, down
    // epilogue auto) or its atomics (3, down 1), beside the RS rows above.
    if (T >= 512)
      for (int dq : {2, 3})
        for (int down : {0, 1})
          for (bool w4a4 : {false, true}) {
            if ((dq == 2 && down == 1) || (w4a4 && (T < 2048 || down == 1))) continue;
            static const char* const dq_labels[3] = {
                "warp-specialized, dequant warpgroup + SS wgmma: gate_up",
                "warp-specialized, dequant warpgroup + SS wgmma: both, down 8 steps deferred",
                "warp-specialized, dequant warpgroup + SS wgmma: both, down atomics"};
            Variant v{dq_labels[dq == 2 ? 0 : down == 0 ? 1 : 2], 5, 0, 0, 0, w4a4, down};
            v.ws_dequant = dq;
            variants.push_back(v);
          }
    // Path 5 as auto was before session 8 (gate_up on 256-row items), beside
    // auto, which takes the wide items from 160 pairs per expert.
    if (T >= 2048)
      for (bool w4a4 : {false, true}) {
        Variant v{"warp-specialized, gate_up items 256 rows x 128 pairs (auto before 2026-12-01 s8)", 5, 0, 0, 0, w4a4};
        v.ws_items = 1;
        variants.push_back(v);
      }
    // Path 5's gate_up on items of 128 rows x up to 256 pairs (one per expert
    // and row block at ~171 pairs per expert), beside auto.
    if (T >= 512)
      for (bool w4a4 : {false, true}) {
        Variant v{"warp-specialized, gate_up items 128 rows x 256 pairs", 5, 0, 0, 0, w4a4};
        v.ws_items = 2;
        variants.push_back(v);
      }
    // Path 5 on 3 persistent CTAs: each runs many items, so down's deferred adds
    // cross items and the last item's are flushed at the end (a correctness
    // row; one CTA per SM leaves ~1 item per CTA at small sizes).
    if (T == 512)
      for (bool w4a4 : {false, true}) {
        Variant v{"warp-specialized, 3 CTAs (many items each)", 5, 0, 0, 0, w4a4};
        v.ws_ctas = 3;
        variants.push_back(v);
        v.label = "warp-specialized, dequant warpgroup both GEMMs, 3 CTAs (many items each)";
        v.ws_dequant = 3;
        variants.push_back(v);
        v.label = "warp-specialized, gate_up items 128 rows x 256 pairs, 3 CTAs (many items each)";
        v.ws_dequant = 0;
        v.ws_items = 2;
        variants.push_back(v);
      }
    // Decode sizes: the auto and the previous rule once more at the end, so
    // that an order effect (clocks, L2 state) shows as a difference between
    // two rows of one configuration.
    if (T <= 2) {
      Variant again = variants[0];
      again.label = "auto, again";
      variants.push_back(again);
      again = before;
      again.label = T == 1 ? "before: direct, batched <= 64 regs, PDL, again" : "before: direct, registers, PDL, again";
      variants.push_back(again);
    }
    bool warmed = false;
    for (const Variant& v : variants) {
      if (!moe_row_selected(v.label)) continue;
      MoeConfig cfg;
      cfg.path = v.path;
      cfg.down_k_slices = v.down_ks;
      cfg.weight_loads = v.loads;
      cfg.pdl = v.pdl;
      cfg.gate_up_k_slices = v.gate_up_ks;
      cfg.x_quantized = v.x_pre;
      const uint16_t* xin = v.x_pre ? xq.p : x.p;
      cfg.ws_down_epilogue = v.ws_down;
      cfg.ws_gate_up_depth = v.ws_depth;
      cfg.ws_ctas = v.ws_ctas;
      cfg.ws_dequant = v.ws_dequant;
      cfg.ws_gate_up_items = v.ws_items;
      MoeWeights wv = w;
      wv.w4a4 = v.w4a4;
      const std::vector<double>& rv = v.w4a4 ? ref4 : ref;
      auto step = [&](int st) {
        fused_moe_decode(wv, xin + size_t(st) * T * H, dids.p + size_t(st) * T * topk,
                         dw.p + size_t(st) * T * topk, T, topk, out.p + size_t(st) * T * H,
                         ws.p + ws_bytes * st, s, cfg);
      };
      if (!warmed && T <= 40) {  // the GPU runs the first timed rows at full clocks
        warmed = true;
        for (int i = 0; i < 2000 / T; ++i) step(i % sets);
      }
      // Correctness on set 0: poisoned output and scratch, fresh inputs.
      CK(cudaMemsetAsync(out.p, 0xFF, out.n * 4, s));
      CK(cudaMemsetAsync(ws.p, 0xFF, ws.n, s));
      step(0);
      CK(cudaStreamSynchronize(s));
      std::vector<float> got = out.download();
      double num = 0, den = 0;
      long nan = 0;
      for (size_t i = 0; i < size_t(T) * H; ++i) nan += std::isnan(got[i]);
      for (size_t ci = 0; ci < check_tokens.size(); ++ci)
        for (int n = 0; n < H; ++n) {
          const double o = got[size_t(check_tokens[ci]) * H + n], r = rv[ci * H + n];
          if (std::isnan(o)) continue;
          num += (o - r) * (o - r);
          den += r * r;
        }
      // Path 5 on a few CTAs: the reference covers 32 tokens, which may miss the
      // tile of the CTAs' last items, so the whole output is also compared with
      // the default grid's (FP32 atomics in another order: ~1e-7 apart).
      double grid_diff = -1;
      if (v.ws_ctas) {
        MoeConfig full = cfg;
        full.ws_ctas = 0;
        CK(cudaMemsetAsync(out.p, 0xFF, out.n * 4, s));
        fused_moe_decode(wv, xin, dids.p, dw.p, T, topk, out.p, ws.p, s, full);
        CK(cudaStreamSynchronize(s));
        const std::vector<float> base = out.download();
        double dn = 0, dd = 0;
        for (size_t i = 0; i < size_t(T) * H; ++i) {
          dn += (double(got[i]) - base[i]) * (double(got[i]) - base[i]);
          dd += double(base[i]) * base[i];
        }
        grid_diff = std::sqrt(dn / std::max(dd, 1e-300));
      }
      Row r;
      r.kernel = "fused_moe";
      r.shape = "kimi E" + std::to_string(E) + " H7168 I2048 top8";
      r.M = T;
      r.mode = v.w4a4 ? "W4A4" : "W4A16";
      r.us = median_us([&](int i) { step(i % sets); }, iters, s);
      // From 512 tokens the MoE is compute-shaped: the floor is the larger of the
      // byte floor and the FLOPs at the BF16 dense datasheet peak (989 TFLOP/s).
      r.floor_us = T >= 512 ? std::max(floor_us(bytes), flops / 989e6) : floor_us(bytes);
      r.rel_err = std::sqrt(num / std::max(den, 1e-300));
      r.nan_count = nan;
      r.extra = avg_touched;
      char tf[64];
      std::snprintf(tf, sizeof tf, ", %.0f TFLOP/s", flops / r.us / 1e6);
      r.note = std::string(v.label) + ", events" + (T >= 512 ? tf : "") +
               (T > 40 ? ", err on 32 tokens" : "");
      if (v.ws_ctas) {  // the report's error bound then judges the whole output too
        char gd[96];
        std::snprintf(gd, sizeof gd, ", whole output vs one CTA per SM %.2e", grid_diff);
        r.note += gd;
        r.rel_err = std::isfinite(grid_diff) ? std::max(r.rel_err, grid_diff) : 1.0;
      }
      // Path 5 (forced, or auto from 2048 tokens): each phase of the call timed.
      if (T >= 2048 && (v.path == 0 || v.path == 5) && v.ws_ctas == 0)
        r.note += mxbench::moe_phase_note([&](int i) { step(i % sets); }, cfg, 10, s);
      emit(r);
      // Graph rows for auto and the bulk variants.
      // Prefill sizes: the warp-specialized path only (its host-side tensor maps
      // must be captured by value).
      if (T >= 512 ? v.path != 5 || v.ws_down != 0 || v.ws_depth != 0 || v.ws_ctas != 0 || v.ws_items == 1 : !((v.path == 0 && v.pdl == 0) || v.loads >= 3 || v.label[0] == 'b')) continue;
      // The same steps replayed from a CUDA graph (proves capture, removes launch gaps).
      cudaGraph_t graph;
      cudaGraphExec_t exec;
      CK(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal));
      for (int st = 0; st < sets; ++st) step(st);
      CK(cudaStreamEndCapture(s, &graph));
      CK(cudaGraphInstantiate(&exec, graph, 0));
      const double graph_us = median_us([&](int) { CK(cudaGraphLaunch(exec, s)); }, 50, s) / sets;
      cudaGraphExecDestroy(exec);
      cudaGraphDestroy(graph);
      Row g = r;
      g.us = graph_us;
      g.note = std::string(v.label) + ", CUDA graph, mean of " + std::to_string(sets) + " steps";
      emit(g);
    }
  }
}

}  // namespace

int main(int argc, char** argv) {
  bool quick = false, profile = false, moe_prefill = false;
  bool w4a4_prefill = false;  // --w4a4-prefill: bench_w4a4_fp8.cu only
  bool moe_decode = false;    // --moe-decode: --decode's MoE rows only
  bool checks = false;        // --checks: the W4A4 quantizer and the device re-layout, bit-exact, only
  bool read_probe = false;    // --read-probe: ways of streaming a weight's bytes (read_floor_probe.h)
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
    else if (!std::strcmp(argv[i], "--checks")) checks = true;
    else if (!std::strcmp(argv[i], "--read-probe")) read_probe = true;
    else if (!std::strcmp(argv[i], "--json") && i + 1 < argc) json = argv[++i];
    else if (!std::strcmp(argv[i], "--seed") && i + 1 < argc) g_seed = std::stoull(argv[++i]);
    else {
      std::fprintf(stderr, "usage: mxfp4_bench [--quick] [--profile] [--moe-prefill [--moe-tokens T]] [--w4a4-prefill [--moe-tokens T]] [--decode] [--moe-decode] [--dense] [--dense-small] [--read-probe] [--checks] [--json FILE] [--seed N]\n");
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
    if (read_probe) {
      for (const Shape& sh : {Shape{"dense_gate_up", 36864, 7168}, Shape{"dense_down", 7168, 18432}}) {
        bench_read_floor(sh, s);
        bench_read_probes(sh, s);
      }
      return 0;
    }
    if (checks) {
      check_quantizer(s);
      check_device_pack(s);
    } else if (moe_prefill) {
      bench_moe(moe_tokens, s, 384);
    } else if (g_dense_small) {
      bench_read_floor({"dense_gate_up", 36864, 7168}, s);
      bench_read_floor({"dense_down", 7168, 18432}, s);
      bench_dense({"dense_gate_up", 36864, 7168}, {1, 8, 12, 16}, s, false);
      bench_dense({"dense_down", 7168, 18432}, {1, 8, 12, 16}, s, false);
      bench_dense({"expert_gate_up", 4096, 7168}, {1, 16}, s, false);
      bench_dense({"expert_down", 7168, 2048}, {1, 16}, s, false);
      bench_dense({"expert_gate_up", 4096, 7168}, {1, 16}, s, true);
      bench_dense({"mla_o_proj", 7168, 8192}, {1, 16}, s, false);
      bench_dense({"mla_q_b_proj", 12288, 1536}, {1, 16}, s, false);
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

    std::printf("\n| kernel | shape | M/T | mode | time us | floor us | ratio | rel err | unwritten | note |\n");
    std::printf("|---|---|---|---|---|---|---|---|---|---|\n");
    for (const Row& r : g_rows)
      std::printf("| %s | %s | %d | %s | %.2f | %.2f | %.2f | %.2e | %ld | %s |\n", r.kernel.c_str(),
                  r.shape.c_str(), r.M, r.mode.c_str(), r.us, r.floor_us,
                  r.floor_us > 0 ? r.us / r.floor_us : 0.0, r.rel_err, r.nan_count, r.note.c_str());
    if (g_json) std::fclose(g_json);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "mxfp4_bench: %s\n", e.what());
    return 1;
  }
  return 0;
}
