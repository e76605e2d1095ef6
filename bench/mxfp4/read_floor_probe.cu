// --read-probe: see read_floor_probe.h.
#include "read_floor_probe.h"

#include <cuda_runtime.h>

#include <cstdio>

#include "cuda/device_info.h"
#include "cuda/mxfp4_device.cuh"
#include "device_buffer.h"
#include "timing.h"

namespace mxbench {

namespace {

namespace dev = mx::cuda::dev;

template <bool kL2Hint>
__device__ __forceinline__ uint32_t load_xor(const uint4* q) {
  uint4 v;
  if constexpr (kL2Hint)
    asm volatile("ld.global.nc.L1::no_allocate.L2::256B.v4.u32 {%0,%1,%2,%3}, [%4];"
                 : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w) : "l"(q));
  else
    asm volatile("ld.global.nc.L1::no_allocate.v4.u32 {%0,%1,%2,%3}, [%4];"
                 : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w) : "l"(q));
  return v.x ^ v.y ^ v.z ^ v.w;
}

// The read-only launch: the whole grid strides over the weight, 4 loads in
// flight per thread.
__global__ void read_only_kernel(const uint4* __restrict__ p, size_t n, uint32_t* out) {
  const size_t stride = size_t(gridDim.x) * blockDim.x;
  size_t i = size_t(blockIdx.x) * blockDim.x + threadIdx.x;
  uint32_t acc = 0;
  for (; i + 3 * stride < n; i += 4 * stride) {
    uint32_t v[4];
#pragma unroll
    for (int k = 0; k < 4; ++k) v[k] = load_xor<false>(p + i + k * stride);
    acc ^= v[0] ^ v[1] ^ v[2] ^ v[3];
  }
  for (; i < n; i += stride) acc ^= load_xor<false>(p + i);
  if (acc == 0x9E3779B9u) out[blockIdx.x] = acc;  // depends on the data: the loads stay
}

// Each CTA reads one contiguous range, kInFlight 16-byte loads per thread
// issued before any is used.
template <int kInFlight, bool kL2Hint>
__global__ void ldg_range_kernel(const uint4* __restrict__ p, size_t n, uint32_t* out) {
  const size_t per = (n + gridDim.x - 1) / gridDim.x;
  const size_t b0 = size_t(blockIdx.x) * per, b1 = b0 + per < n ? b0 + per : n;
  uint32_t acc = 0;
  size_t i = b0 + threadIdx.x;
  const size_t step = size_t(blockDim.x) * kInFlight;
  for (; i + (kInFlight - 1) * blockDim.x < b1; i += step) {
    uint32_t v[kInFlight];
#pragma unroll
    for (int k = 0; k < kInFlight; ++k) v[k] = load_xor<kL2Hint>(p + i + k * blockDim.x);
#pragma unroll
    for (int k = 0; k < kInFlight; ++k) acc ^= v[k];
  }
  for (; i < b1; i += blockDim.x) acc ^= load_xor<kL2Hint>(p + i);
  if (acc == 0x9E3779B9u) out[blockIdx.x] = acc;  // depends on the data: the loads stay
}

// One producer thread (warp 0, lane 0) streams the CTA's contiguous range in
// kChunk-byte bulk copies into a ring of `stages` slots; kConsumers warps wait
// for each slot and give it back; kConsume: they also read it (16-byte LDS per
// lane, the pass a GEMM consumer would make).
template <int kChunk, int kConsumers, bool kConsume>
__global__ void bulk_range_kernel(const uint8_t* __restrict__ p, size_t bytes, int stages, uint32_t* out) {
  extern __shared__ __align__(128) uint8_t smem[];
  const uint32_t ring = static_cast<uint32_t>(__cvta_generic_to_shared(smem));
  const uint32_t full = ring + uint32_t(stages) * kChunk, empty = full + 8 * stages;
  const size_t chunks = (bytes + kChunk - 1) / kChunk;
  const size_t c0 = chunks * blockIdx.x / gridDim.x, c1 = chunks * (blockIdx.x + 1) / gridDim.x;
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  if (threadIdx.x == 0) {
    for (int st = 0; st < stages; ++st) {
      dev::mbar_init(full + 8 * st, 1);
      dev::mbar_init(empty + 8 * st, kConsumers);
    }
    dev::fence_mbar_init();
  }
  __syncthreads();
  if (warp == 0) {
    if (lane == 0)
      for (size_t c = c0; c < c1; ++c) {
        const int j = int(c - c0), slot = j % stages, round = j / stages;
        if (round > 0) dev::mbar_wait_parity(empty + 8 * slot, (round - 1) & 1);
        const uint32_t len = uint32_t(c + 1 < chunks ? kChunk : bytes - c * kChunk);
        dev::mbar_arrive_expect_tx(full + 8 * slot, len);
        dev::bulk_copy_g2s(ring + slot * kChunk, p + c * kChunk, len, full + 8 * slot);
      }
    return;
  }
  uint32_t acc = 0;
  const int cw = warp - 1;
  for (size_t c = c0; c < c1; ++c) {
    const int j = int(c - c0), slot = j % stages, round = j / stages;
    dev::mbar_wait_parity(full + 8 * slot, round & 1);
    if constexpr (kConsume) {
      const uint32_t base = ring + slot * kChunk;
      constexpr int kPerWarp = kChunk / kConsumers;
#pragma unroll 4
      for (int o = lane * 16; o < kPerWarp; o += 512) {
        uint32_t a, b, x, y;
        asm volatile("ld.shared.v4.u32 {%0,%1,%2,%3}, [%4];"
                     : "=r"(a), "=r"(b), "=r"(x), "=r"(y) : "r"(base + cw * kPerWarp + o));
        acc ^= a ^ b ^ x ^ y;
      }
    }
    __syncwarp();
    if (lane == 0) dev::mbar_arrive(empty + 8 * slot);
  }
  if (acc == 0x9E3779B9u) out[blockIdx.x] = acc;
}

}  // namespace

namespace {

// Median microseconds of `launch(copy)` over 200 launches, copies in turn.
template <class Launch>
double time_launches(const uint8_t* buf, size_t bytes, int copies, cudaStream_t s, Launch launch) {
  const double us = median_us([&](int i) { launch(buf + size_t(i % copies) * bytes); }, 200, s);
  check_cuda_call(cudaGetLastError(), "read probe launch");
  return us;
}

}  // namespace

double time_read_only_launch(const uint8_t* buf, size_t bytes, int copies, cudaStream_t s) {
  DeviceBuffer<uint32_t> out(65536);
  const int sms = mx::cuda::sm_count();
  return time_launches(buf, bytes, copies, s, [&](const uint8_t* p) {
    read_only_kernel<<<sms * 8, 256, 0, s>>>(reinterpret_cast<const uint4*>(p), bytes / 16, out.p);
  });
}

std::vector<ReadProbe> run_read_probes(const uint8_t* buf, size_t bytes, int copies, cudaStream_t s) {
  const int sms = mx::cuda::sm_count();
  DeviceBuffer<uint32_t> out_buf(65536);
  uint32_t* out = out_buf.p;
  std::vector<ReadProbe> rows;
  auto time = [&](const std::string& label, auto launch) {
    const double us = time_launches(buf, bytes, copies, s, launch);
    rows.push_back({label, us, last_timed_window()});
  };
  const size_t n16 = bytes / 16;
  time("ldg range x8, 4 CTAs x 512 / SM", [&](const uint8_t* p) {
    ldg_range_kernel<8, false><<<sms * 4, 512, 0, s>>>(reinterpret_cast<const uint4*>(p), n16, out);
  });
  time("ldg range x8 L2::256B, 4 CTAs x 512 / SM", [&](const uint8_t* p) {
    ldg_range_kernel<8, true><<<sms * 4, 512, 0, s>>>(reinterpret_cast<const uint4*>(p), n16, out);
  });
  time("ldg range x16, 2 CTAs x 512 / SM", [&](const uint8_t* p) {
    ldg_range_kernel<16, false><<<sms * 2, 512, 0, s>>>(reinterpret_cast<const uint4*>(p), n16, out);
  });
  auto bulk = [&](auto kernel, int chunk, int stages, int ctas_per_sm, const char* what) {
    const int smem = stages * (chunk + 16);
    check_cuda_call(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem), "smem attribute");
    char label[160];
    std::snprintf(label, sizeof label, "bulk %d KB x %d stages, %d CTA%s / SM, %s", chunk / 1024, stages,
                  ctas_per_sm, ctas_per_sm > 1 ? "s" : "", what);
    time(label, [&](const uint8_t* p) { kernel<<<sms * ctas_per_sm, 32 * 5, smem, s>>>(p, bytes, stages, out); });
  };
  bulk(bulk_range_kernel<8192, 4, false>, 8192, 8, 1, "wait only");
  bulk(bulk_range_kernel<8192, 4, false>, 8192, 16, 1, "wait only");
  bulk(bulk_range_kernel<4096, 4, false>, 4096, 32, 1, "wait only");
  bulk(bulk_range_kernel<16384, 4, false>, 16384, 12, 1, "wait only");
  bulk(bulk_range_kernel<8192, 4, false>, 8192, 12, 2, "wait only");
  bulk(bulk_range_kernel<8192, 4, true>, 8192, 16, 1, "LDS read");
  bulk(bulk_range_kernel<16384, 4, true>, 16384, 12, 1, "LDS read");
  bulk(bulk_range_kernel<8192, 4, true>, 8192, 12, 2, "LDS read");
  bulk(bulk_range_kernel<4096, 4, true>, 4096, 24, 2, "LDS read");
  return rows;
}

}  // namespace mxbench
