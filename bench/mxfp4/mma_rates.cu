// mxfp4_bench --mma-rates: the issue rates of the instructions the MXFP4
// kernels are made of, each alone on the whole GPU (every SM, chosen warps per
// SM), with the SM clock each row ran at. Why: the dense kernels at 12-64
// tokens run at 0.4-0.5 issued instructions per cycle and scheduler, and the
// open question is which pipe sets that (docs/kernels.md, "Where the time
// goes"): the tensor pipe through mma.sync (kernels 1-10: two m16n8k16 per
// 16x16 weight piece at 9..16 tokens) or through wgmma with A from registers
// (kernel 11 and the MoE prefill: m64nNk16 with N = the tokens), or the
// integer pipe that runs the dequant's LOP3 / SHF / PRMT, or the FMA pipe of
// its HMUL2 and IMAD.
//
// Each row: one launch of `ctas_per_sm` x SMs CTAs whose warps run
// independent chains of one instruction (kChains chains, so that the rate is
// the pipe's, not one chain's latency), timed with events (median of 20),
// reported as operations per second and, with the row's SM clock, warp
// instructions per cycle per SM. Operands are random so that the tensor
// rows draw power as real data does.
#include <cuda_runtime.h>

#include <cstdint>
#include <cstdio>
#include <string>

#include "bench_rows.h"
#include "cuda/device_info.h"
#include "cuda/mxfp4_device.cuh"
#include "cuda/wgmma_rs_narrow.cuh"
#include "device_buffer.h"
#include "mma_rates.h"
#include "timing.h"

namespace mxbench {

namespace {

namespace dev = mx::cuda::dev;

constexpr int kChains = 8;  // independent accumulators / registers per warp

__device__ __forceinline__ uint32_t mix(uint32_t v) {
  v ^= v >> 16;
  v *= 0x7feb352du;
  v ^= v >> 15;
  v *= 0x846ca68bu;
  return v ^ (v >> 16);
}

// Two random BF16 in (-2, -0.5] U [0.5, 2): exponents 126 / 127, any mantissa.
__device__ __forceinline__ uint32_t random_bf16x2(uint32_t seed) {
  const uint32_t r = mix(seed);
  return (r & 0x807F807Fu) | 0x3F003F00u | ((r >> 7) & 0x00800080u);
}

// The dependent-chain sums are stored so that nothing is left out.
__device__ __forceinline__ void keep(float v, float* sink) {
  if (v == 1.2345f) *sink = v;  // practically never: no store traffic in the loop
}

// mma.sync m16n8k16 BF16 -> FP32, kChains accumulators per warp.
__global__ void mma_sync_rate_kernel(int iters, float* sink) {
  const uint32_t seed = blockIdx.x * blockDim.x + threadIdx.x;
  uint32_t a[4];
  for (int i = 0; i < 4; ++i) a[i] = random_bf16x2(seed * 8 + i);
  const uint32_t b0 = random_bf16x2(seed * 8 + 4), b1 = random_bf16x2(seed * 8 + 5);
  float acc[kChains][4] = {};
  for (int it = 0; it < iters; ++it)
#pragma unroll
    for (int c = 0; c < kChains; ++c) dev::mma_bf16_16816(acc[c], a, b0, b1);
  float sum = 0.f;
#pragma unroll
  for (int c = 0; c < kChains; ++c) sum += acc[c][0] + acc[c][1] + acc[c][2] + acc[c][3];
  keep(sum, sink);
}

// wgmma m64nNk16 BF16, A from registers, B (N x 16, K-major, no swizzle) in
// shared memory; 4 MMAs per commit group and at most 2 groups in flight, as
// the kernels run them (kernel 11: a tile = 4 k16 steps, wait for the
// previous tile's group).
template <int N>
__global__ void wgmma_rs_rate_kernel(int iters, float* sink) {
  __shared__ __align__(128) uint4 b_tile[2 * N];  // [2 chunks of 8 K][N rows][16 bytes]
  const uint32_t seed = blockIdx.x * blockDim.x + threadIdx.x;
  for (int i = threadIdx.x; i < 2 * N; i += blockDim.x)
    b_tile[i] = make_uint4(random_bf16x2(seed * 4 + 7 * i), random_bf16x2(seed * 4 + 7 * i + 1),
                           random_bf16x2(seed * 4 + 7 * i + 2), random_bf16x2(seed * 4 + 7 * i + 3));
  dev::fence_proxy_async();  // generic-proxy writes before wgmma's async-proxy reads
  __syncthreads();
  const uint32_t addr = dev::smem_addr(b_tile);
  const uint64_t desc = dev::kmajor_b_desc(addr, N * 16);  // one chunk of N rows between K chunks
  uint32_t a[4];
  for (int i = 0; i < 4; ++i) a[i] = random_bf16x2(seed * 8 + i);
  float acc[N / 2 < 32 ? 32 : N / 2] = {};
  for (int it = 0; it < iters; ++it) {
    dev::wgmma_fence();
#pragma unroll
    for (int k = 0; k < 4; ++k) {
      if constexpr (N == 16) dev::wgmma_rs_bf16_n16(reinterpret_cast<float(&)[8]>(acc), a, desc);
      else if constexpr (N == 32) dev::wgmma_rs_bf16_n32(reinterpret_cast<float(&)[16]>(acc), a, desc);
      else dev::wgmma_rs_bf16<N / 64>(acc, a, desc);
    }
    dev::wgmma_commit();
    dev::wgmma_wait<1>();
  }
  dev::wgmma_wait<0>();
  dev::fence_accumulators(acc);
  float sum = 0.f;
  for (int i = 0; i < N / 2; ++i) sum += acc[i];
  keep(sum, sink);
}

// kChains dependent chains of one integer or half-precision instruction.
enum class Op { kLop3, kShfRotate, kPrmt, kHmul2, kImadShl, kDequantMix };

template <Op kOp>
__global__ void alu_rate_kernel(int iters, float* sink) {
  const uint32_t seed = blockIdx.x * blockDim.x + threadIdx.x;
  uint32_t v[kChains];
  for (int c = 0; c < kChains; ++c) v[c] = random_bf16x2(seed * kChains + c);
  const uint32_t m = random_bf16x2(seed + 12345), n = mix(seed + 777) | 1u;
  for (int it = 0; it < iters; ++it)
#pragma unroll
    for (int c = 0; c < kChains; ++c) {
      if constexpr (kOp == Op::kLop3)
        asm volatile("lop3.b32 %0, %0, %1, %2, 0x96;" : "+r"(v[c]) : "r"(m), "r"(n));
      else if constexpr (kOp == Op::kShfRotate)
        asm volatile("shf.l.wrap.b32 %0, %0, %0, 7;" : "+r"(v[c]));
      else if constexpr (kOp == Op::kPrmt)
        asm volatile("prmt.b32 %0, %0, %1, 0x4563;" : "+r"(v[c]) : "r"(m));
      else if constexpr (kOp == Op::kHmul2)
        asm volatile("mul.rn.bf16x2 %0, %0, %1;" : "+r"(v[c]) : "r"(m));
      else if constexpr (kOp == Op::kImadShl)
        asm volatile("mad.lo.u32 %0, %0, 16, %1;" : "+r"(v[c]) : "r"(n));
      else {  // the dequant's mix per BF16x2 register: 2 LOP3, 1 rotate, 1 HMUL2 (kernel 9's SASS ~ 5:2:4 per word)
        asm volatile(
            "lop3.b32 %0, %0, %1, %2, 0xC8;\n\t"
            "shf.l.wrap.b32 %0, %0, %0, 6;\n\t"
            "lop3.b32 %0, %0, %2, %1, 0x6A;\n\t"
            "mul.rn.bf16x2 %0, %0, %1;"
            : "+r"(v[c])
            : "r"(m), "r"(n));
      }
    }
  uint32_t x = 0;
  for (int c = 0; c < kChains; ++c) x ^= v[c];
  keep(__uint_as_float(x), sink);
}

struct RateCase {
  const char* name;
  void (*kernel)(int, float*);
  int threads;        // per CTA
  int instr_per_it;     // warp instructions per loop iteration and warp
  double flops_per_it;  // MMA FLOPs per iteration and warp (a wgmma's are its warpgroup's: a
                        // quarter per warp); 0: not an MMA
};

}  // namespace

void bench_mma_rates(cudaStream_t s) {
  const int sms = mx::cuda::sm_count();
  DeviceBuffer<float> sink(1);
  const RateCase cases[] = {
      {"mma.sync m16n8k16 bf16", mma_sync_rate_kernel, 128, kChains, 4096.0 * kChains},
      {"wgmma RS m64n16k16 bf16", wgmma_rs_rate_kernel<16>, 128, 4, 2.0 * 64 * 16 * 16},
      {"wgmma RS m64n32k16 bf16", wgmma_rs_rate_kernel<32>, 128, 4, 2.0 * 64 * 32 * 16},
      {"wgmma RS m64n64k16 bf16", wgmma_rs_rate_kernel<64>, 128, 4, 2.0 * 64 * 64 * 16},
      {"wgmma RS m64n128k16 bf16", wgmma_rs_rate_kernel<128>, 128, 4, 2.0 * 64 * 128 * 16},
      {"lop3", alu_rate_kernel<Op::kLop3>, 128, kChains, 0},
      {"shf.l.wrap (rotate)", alu_rate_kernel<Op::kShfRotate>, 128, kChains, 0},
      {"prmt", alu_rate_kernel<Op::kPrmt>, 128, kChains, 0},
      {"mul.rn.bf16x2 (HMUL2)", alu_rate_kernel<Op::kHmul2>, 128, kChains, 0},
      {"mad.lo.u32 by 16 (IMAD.SHL)", alu_rate_kernel<Op::kImadShl>, 128, kChains, 0},
      {"dequant mix 2 lop3 + rotate + hmul2", alu_rate_kernel<Op::kDequantMix>, 128, 4 * kChains, 0},
  };
  for (const RateCase& c : cases)
    for (int ctas_per_sm : {1, 2, 4, 5}) {
      // Wgmma CTAs are one warpgroup; mma.sync and ALU CTAs 4 warps: 4..20 warps per SM.
      const bool mma = c.flops_per_it > 0;
      const int iters = mma ? 4096 : 16384;
      const unsigned grid = unsigned(sms * ctas_per_sm);
      c.kernel<<<grid, c.threads, 0, s>>>(iters, sink.p);  // warm-up, and the launch is checked once
      CK(cudaGetLastError());
      CK(cudaStreamSynchronize(s));
      const double us = median_us([&](int) { c.kernel<<<grid, c.threads, 0, s>>>(iters, sink.p); }, 20, s);
      const double warps = double(grid) * c.threads / 32;
      const double flops = warps * iters * c.flops_per_it;
      const double instr = warps * iters * c.instr_per_it;
      Row r;
      r.kernel = "mma_rate";
      r.shape = c.name;
      r.M = ctas_per_sm * c.threads / 32;  // warps per SM
      r.mode = mma ? "tensor" : "alu";
      r.us = us;
      char note[160];
      if (mma)
        std::snprintf(note, sizeof note, "%.1f TFLOP/s, %.3g warp instr/SM/us", flops / us / 1e6, instr / sms / us);
      else
        std::snprintf(note, sizeof note, "%.3g warp instr/SM/us", instr / sms / us);
      r.note = note;
      emit(r);
    }
}

}  // namespace mxbench
