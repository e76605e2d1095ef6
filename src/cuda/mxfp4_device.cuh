// Device building blocks of the MXFP4 kernels: loads, BF16 dequantization in
// registers, and the mma.sync loop over one 16-row strip. Included by the .cu
// files of src/cuda only.
#pragma once
#include <cuda_bf16.h>

#include <cstdint>

#include "cuda/host/mxfp4_bits.h"

namespace mx::cuda::dev {

// Weights are read once: keep them out of L1 so activations stay there.
__device__ __forceinline__ uint4 load_stream(const uint4* p) {
  uint4 v;
  asm volatile("ld.global.nc.L1::no_allocate.v4.u32 {%0,%1,%2,%3}, [%4];"
               : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
               : "l"(p));
  return v;
}

__device__ __forceinline__ uint4 load_act(const uint16_t* p) {
  return __ldg(reinterpret_cast<const uint4*>(p));
}

// a * b for BF16x2 (exact here: one factor is a power of two). fma with -0 keeps
// the sign of zero products.
__device__ __forceinline__ uint32_t bf16x2_mul(uint32_t a, uint32_t b) {
  uint32_t d;
  asm("fma.rn.bf16x2 %0, %1, %2, %3;" : "=r"(d) : "r"(a), "r"(b), "r"(0x80008000u));
  return d;
}

__device__ __forceinline__ void mma_bf16_16816(float (&c)[4], const uint32_t (&a)[4], uint32_t b0,
                                               uint32_t b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, "
      "{%8,%9}, {%0,%1,%2,%3};"
      : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

// BF16x2 multipliers for a lane's two rows (g: low byte, g + 8: high byte).
struct ScaleMul {
  uint32_t lo, hi;    // 2^(s-1) (s clamped to 128 when kBig)
  uint32_t lo2, hi2;  // kBig only: 2^(max(s,128) - 128)
};

template <bool kBig>
__device__ __forceinline__ ScaleMul scale_multipliers(uint32_t sc16) {
  ScaleMul m;
  if constexpr (!kBig) {
    // (s + 126) << 7 in both halves: one byte-permute and one multiply-add.
    m.lo = __byte_perm(sc16, 0, 0x4040) * 128u + 0x3F003F00u;
    m.hi = __byte_perm(sc16, 0, 0x4141) * 128u + 0x3F003F00u;
  } else {
    const uint32_t s0 = sc16 & 0xFF, s1 = (sc16 >> 8) & 0xFF;
    const uint32_t a0 = scale_multiplier_bits(min(s0, 128u)), a1 = scale_multiplier_bits(min(s1, 128u));
    const uint32_t b0 = big_scale_second_bits(max(s0, 128u)), b1 = big_scale_second_bits(max(s1, 128u));
    m.lo = a0 | (a0 << 16);
    m.hi = a1 | (a1 << 16);
    m.lo2 = b0 | (b0 << 16);
    m.hi2 = b1 | (b1 << 16);
  }
  return m;
}

// The A fragment (rows g, g+8) of one k16 step from one layout word: 4
// rotations + 5 LOP3 (e2m1_word_bits), then the scale multiplies.
template <bool kBig>
__device__ __forceinline__ void dequant_fragment(uint32_t word, const ScaleMul& m, uint32_t (&a)[4]) {
  uint32_t bits[4];
  e2m1_word_bits(word, bits);
  a[0] = bf16x2_mul(bits[0], m.lo);
  a[1] = bf16x2_mul(bits[1], m.hi);
  a[2] = bf16x2_mul(bits[2], m.lo);
  a[3] = bf16x2_mul(bits[3], m.hi);
  if constexpr (kBig) {
    a[0] = bf16x2_mul(a[0], m.lo2);
    a[1] = bf16x2_mul(a[1], m.hi2);
    a[2] = bf16x2_mul(a[2], m.lo2);
    a[3] = bf16x2_mul(a[3], m.hi2);
  }
}

__device__ __forceinline__ uint32_t word_of(const uint4& v, int i) {
  return i == 0 ? v.x : i == 1 ? v.y : i == 2 ? v.z : v.w;
}

// One 64-wide K tile of a strip: dequantize the lane's layout word `w` with its
// scale pair `sc` and multiply with the NT token groups' activations xa.
template <int NT, bool kBig>
__device__ __forceinline__ void mma_tile(const uint4& w, uint32_t sc, const uint4 (&xa)[NT][2],
                                         float (&acc)[NT][4]) {
  const ScaleMul m = scale_multipliers<kBig>(sc);
#pragma unroll
  for (int kk = 0; kk < 4; ++kk) {
    uint32_t a[4];
    dequant_fragment<kBig>(word_of(w, kk), m, a);
#pragma unroll
    for (int nt = 0; nt < NT; ++nt) {
      const uint4& xv = xa[nt][kk >> 1];
      mma_bf16_16816(acc[nt], a, word_of(xv, (2 * kk) & 3), word_of(xv, (2 * kk + 1) & 3));
    }
  }
}

// The two 16-byte activation loads of one tile for each token group (zeros for
// padding tokens).
template <int NT>
__device__ __forceinline__ void load_tile_acts(const uint16_t* const (&xrow)[NT], int offset,
                                               uint4 (&xa)[NT][2]) {
#pragma unroll
  for (int nt = 0; nt < NT; ++nt) {
    if (xrow[nt]) {
      xa[nt][0] = load_act(xrow[nt] + offset);
      xa[nt][1] = load_act(xrow[nt] + offset + 8);
    } else {
      xa[nt][0] = xa[nt][1] = make_uint4(0, 0, 0, 0);
    }
  }
}

// Accumulates k-tiles [kt0, kt1) of one 16-row strip into acc for NT groups of
// 8 tokens. `codes`/`scales` point at the strip's first tile; rows[nt] is this
// lane's token row (token nt*8 + g) or null for a padding token. kU tiles of
// weights are requested before any is used. A double-buffered version (2*kU
// loads in flight per warp) needed ~130 registers instead of ~50 and ran
// 15-25% slower on H200: occupancy hides latency better here (docs/kernels.md).
template <int NT, bool kBig, int kU = 4>
__device__ __forceinline__ void strip_mma(const uint8_t* __restrict__ codes,
                                          const uint8_t* __restrict__ scales, int kt0, int kt1,
                                          const uint16_t* const (&rows)[NT], float (&acc)[NT][4]) {
  const int lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
  const uint4* wp = reinterpret_cast<const uint4*>(codes) + lane + kt0 * 32;
  const uint16_t* sp = reinterpret_cast<const uint16_t*>(scales) + (t >> 1) * 8 + g + kt0 * 16;
  const uint16_t* xrow[NT];
#pragma unroll
  for (int nt = 0; nt < NT; ++nt) xrow[nt] = rows[nt] ? rows[nt] + kt0 * kTileK + 16 * t : nullptr;
  for (int kt = kt0; kt < kt1; kt += kU, wp += kU * 32, sp += kU * 16) {
    uint4 w[kU];
    uint32_t sc[kU];
#pragma unroll
    for (int u = 0; u < kU; ++u) {
      if (kt + u < kt1) {
        w[u] = load_stream(wp + u * 32);
        sc[u] = __ldg(sp + u * 16);
      } else {
        w[u] = make_uint4(0, 0, 0, 0);
        sc[u] = 0;
      }
    }
#pragma unroll
    for (int u = 0; u < kU; ++u) {
      if (kt + u >= kt1) break;
      uint4 xa[NT][2];
      load_tile_acts<NT>(xrow, u * kTileK, xa);
      mma_tile<NT, kBig>(w[u], sc[u], xa, acc);
    }
#pragma unroll
    for (int nt = 0; nt < NT; ++nt)
      if (xrow[nt]) xrow[nt] += kU * kTileK;
  }
}

// Ordinary (not read-only) versions of load_stream, a 16-bit load and
// load_act: the compiler keeps them before a following __syncwarp.
__device__ __forceinline__ uint4 load_stream_ordered(const uint4* p) {
  uint4 v;
  asm volatile("ld.global.L1::no_allocate.v4.u32 {%0,%1,%2,%3}, [%4];"
               : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
               : "l"(p));
  return v;
}
__device__ __forceinline__ uint32_t load_u16_ordered(const uint16_t* p) {
  uint16_t v;
  asm volatile("ld.global.u16 %0, [%1];" : "=h"(v) : "l"(p));
  return v;
}
__device__ __forceinline__ uint4 load_act_ordered(const uint16_t* p) {
  uint4 v;
  asm volatile("ld.global.v4.u32 {%0,%1,%2,%3}, [%4];"
               : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
               : "l"(p));
  return v;
}

// Same result as strip_mma. Full batches of kU tiles run without any
// per-tile condition and every load of the batch (weights, scales and the
// activations) is issued before the first use; in strip_mma the compiler
// issues only the first tile's loads, computes it, then issues the rest, and
// loads each tile's activations just before its MMAs (SASS of bfb55ae). A
// remainder of < kU tiles runs one tile at a time.
template <int NT, bool kBig, int kU = 4>
__device__ __forceinline__ void strip_mma_batched(const uint8_t* __restrict__ codes,
                                                  const uint8_t* __restrict__ scales, int kt0,
                                                  int kt1, const uint16_t* const (&rows)[NT],
                                                  float (&acc)[NT][4]) {
  const int lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
  const uint4* wp = reinterpret_cast<const uint4*>(codes) + lane + kt0 * 32;
  const uint16_t* sp = reinterpret_cast<const uint16_t*>(scales) + (t >> 1) * 8 + g + kt0 * 16;
  // Padding tokens read lane 0's token row (always a real one) instead of
  // zeros: their output columns are never stored, and the loads need neither
  // predicates nor zeroed registers (lanes reading one address share the load).
  const uint16_t* real = reinterpret_cast<const uint16_t*>(
      __shfl_sync(0xffffffffu, reinterpret_cast<uintptr_t>(rows[0]), 0));
  const uint16_t* xrow[NT];
#pragma unroll
  for (int nt = 0; nt < NT; ++nt) xrow[nt] = (rows[nt] ? rows[nt] : real) + kt0 * kTileK + 16 * t;
  int kt = kt0;
  for (; kt + kU <= kt1; kt += kU, wp += kU * 32, sp += kU * 16) {
    uint4 w[kU];
    uint32_t sc[kU];
    uint4 xa[kU][NT][2];
#pragma unroll
    for (int u = 0; u < kU; ++u) {
      w[u] = load_stream_ordered(wp + u * 32);
      sc[u] = load_u16_ordered(sp + u * 16);
    }
#pragma unroll
    for (int u = 0; u < kU; ++u)
#pragma unroll
      for (int nt = 0; nt < NT; ++nt) {
        xa[u][nt][0] = load_act_ordered(xrow[nt] + u * kTileK);
        xa[u][nt][1] = load_act_ordered(xrow[nt] + u * kTileK + 8);
      }
    // ptxas otherwise sinks each tile's loads to just before its use (fewer
    // registers, one tile in flight). It keeps ordinary (not read-only .nc)
    // loads on their side of a warp barrier.
    __syncwarp();
#pragma unroll
    for (int u = 0; u < kU; ++u) mma_tile<NT, kBig>(w[u], sc[u], xa[u], acc);
#pragma unroll
    for (int nt = 0; nt < NT; ++nt) xrow[nt] += kU * kTileK;
  }
  for (; kt < kt1; ++kt, wp += 32, sp += 16) {
    const uint4 w = load_stream(wp);
    const uint32_t sc = __ldg(sp);
    uint4 xa[NT][2];
#pragma unroll
    for (int nt = 0; nt < NT; ++nt) {
      xa[nt][0] = load_act(xrow[nt]);
      xa[nt][1] = load_act(xrow[nt] + 8);
      xrow[nt] += kTileK;
    }
    mma_tile<NT, kBig>(w, sc, xa, acc);
  }
}

// ---- Asynchronous copies into shared memory (cp.async, sm_80+) ----

__device__ __forceinline__ uint32_t smem_addr(const void* p) {
  return uint32_t(__cvta_generic_to_shared(p));
}

// 16 bytes global -> shared, bypassing L1 (weights are read once).
__device__ __forceinline__ void cp_async_16(uint32_t dst, const void* src) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" ::"r"(dst), "l"(src) : "memory");
}

// 16 bytes, or 16 zero bytes when !valid (src is then not read).
__device__ __forceinline__ void cp_async_16_or_zero(uint32_t dst, const void* src, bool valid) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;" ::"r"(dst), "l"(src),
               "r"(valid ? 16 : 0)
               : "memory");
}

__device__ __forceinline__ void cp_async_4(uint32_t dst, const void* src) {
  asm volatile("cp.async.ca.shared.global [%0], [%1], 4;" ::"r"(dst), "l"(src) : "memory");
}

__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;" ::: "memory"); }

// Wait until at most N of this thread's committed groups are still in flight.
template <int N>
__device__ __forceinline__ void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;" ::"n"(N) : "memory");
}

__device__ __forceinline__ uint4 lds128(uint32_t a) {
  uint4 v;
  asm volatile("ld.shared.v4.u32 {%0,%1,%2,%3}, [%4];"
               : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
               : "r"(a));
  return v;
}

__device__ __forceinline__ uint32_t lds32(uint32_t a) {
  uint32_t v;
  asm volatile("ld.shared.u32 %0, [%1];" : "=r"(v) : "r"(a));
  return v;
}

__device__ __forceinline__ float2 lds_f32x2(uint32_t a) {
  float2 v;
  asm volatile("ld.shared.v2.f32 {%0,%1}, [%2];" : "=f"(v.x), "=f"(v.y) : "r"(a));
  return v;
}

// Programmatic dependent launch (sm_90): let the next kernel in the stream
// start its prologue now / wait here until the previous kernel finished and
// its writes are visible. Both are no-ops when the launch did not ask for it.
__device__ __forceinline__ void griddep_launch_dependents() {
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
}
__device__ __forceinline__ void griddep_wait() { asm volatile("griddepcontrol.wait;" ::: "memory"); }

// Asks the L2 for `bytes` (a multiple of 16, 16-byte aligned) from `p` with one
// bulk prefetch (the copy engine; no registers held, nothing waited for).
__device__ __forceinline__ void prefetch_l2_bulk(const void* p, uint32_t bytes) {
  asm volatile("cp.async.bulk.prefetch.L2.global [%0], %1;" ::"l"(p), "r"(bytes) : "memory");
}

// Lane 0 asks the L2 for the first `tiles` weight tiles of the warp's K range
// [kt0, kt1) of one strip (`codes`/`scales`: the strip's first tile).
__device__ __forceinline__ void prefetch_strip_tiles(const uint8_t* codes, const uint8_t* scales, int kt0,
                                                     int kt1, int tiles) {
  const int n = min(tiles, kt1 - kt0);
  if ((threadIdx.x & 31) != 0 || n <= 0) return;
  prefetch_l2_bulk(codes + size_t(kt0) * kTileCodeBytes, uint32_t(n) * kTileCodeBytes);
  prefetch_l2_bulk(scales + size_t(kt0) * kTileScaleBytes, uint32_t(n) * kTileScaleBytes);
}

// The strip kernels' start under programmatic dependent launch: let the next
// kernel launch (its CTAs take the SM slots this grid leaves, wait there, and
// ask for their own first weights), ask the L2 for this warp's first weight
// tiles (a prefetch reads nothing into registers: safe before the wait), then
// wait for the previous kernel before anything is read or y written. Without
// the launch attribute both griddep instructions are no-ops and only the
// prefetch remains.
__device__ __forceinline__ void strip_launch_prologue(const uint8_t* codes, const uint8_t* scales, int kt0,
                                                      int kt1, int prefetch_tiles) {
  griddep_launch_dependents();
  prefetch_strip_tiles(codes, scales, kt0, kt1, prefetch_tiles);
  griddep_wait();
}

// Per-warp ring of weight tiles in shared memory: per stage 32 lanes x 16 code
// bytes, then (after all stages) 32 lanes x 4 scale bytes. Each lane copies and
// later reads only its own bytes, so the ring needs no barrier, only
// cp.async.wait_group.
constexpr int kRingCodeBytes = 512, kRingScaleBytes = 128;
constexpr int ring_bytes(int depth) { return depth * (kRingCodeBytes + kRingScaleBytes); }

// Same result as strip_mma, but the weight tiles stream through the warp's
// shared-memory ring `ring` (ring_bytes(kDepth), 16-byte aligned) kDepth - 1
// tiles ahead, so many bytes are in flight without holding registers. When
// `wait_prior_grid`, the first weight copies are issued before waiting for the
// previous kernel (programmatic dependent launch): activations may come from it.
template <int NT, bool kBig, int kDepth>
__device__ __forceinline__ void strip_mma_ring(const uint8_t* __restrict__ codes,
                                               const uint8_t* __restrict__ scales, int kt0, int kt1,
                                               const uint16_t* const (&rows)[NT], float (&acc)[NT][4],
                                               uint8_t* ring, bool wait_prior_grid = false) {
  static_assert((kDepth & (kDepth - 1)) == 0, "ring depth must be a power of two");
  const int lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
  const uint8_t* wsrc = codes + size_t(kt0) * kTileCodeBytes + lane * 16;
  // The 4-byte word holding this lane's 16-bit scale pair (u16 index (t/2)*8 + g).
  const uint8_t* ssrc = scales + size_t(kt0) * kTileScaleBytes + (t >> 1) * 16 + (g >> 1) * 4;
  const uint32_t rc = smem_addr(ring) + lane * 16;
  const uint32_t rs = smem_addr(ring) + kDepth * kRingCodeBytes + lane * 4;
  const int n = kt1 - kt0;
#pragma unroll
  for (int i = 0; i < kDepth - 1; ++i) {
    if (i < n) {
      cp_async_16(rc + i * kRingCodeBytes, wsrc + i * kTileCodeBytes);
      cp_async_4(rs + i * kRingScaleBytes, ssrc + i * kTileScaleBytes);
    }
    cp_async_commit();
  }
  if (wait_prior_grid) griddep_wait();
  const uint16_t* xrow[NT];
#pragma unroll
  for (int nt = 0; nt < NT; ++nt) xrow[nt] = rows[nt] ? rows[nt] + kt0 * kTileK + 16 * t : nullptr;
  for (int i = 0; i < n; ++i) {
    const int j = i + kDepth - 1;
    if (j < n) {
      const int st = j & (kDepth - 1);
      cp_async_16(rc + st * kRingCodeBytes, wsrc + size_t(j) * kTileCodeBytes);
      cp_async_4(rs + st * kRingScaleBytes, ssrc + size_t(j) * kTileScaleBytes);
    }
    cp_async_commit();
    uint4 xa[NT][2];
#pragma unroll
    for (int nt = 0; nt < NT; ++nt) {
      if (xrow[nt]) {
        xa[nt][0] = load_act(xrow[nt]);
        xa[nt][1] = load_act(xrow[nt] + 8);
        xrow[nt] += kTileK;
      } else {
        xa[nt][0] = xa[nt][1] = make_uint4(0, 0, 0, 0);
      }
    }
    cp_async_wait<kDepth - 1>();
    const int st = i & (kDepth - 1);
    const uint4 w = lds128(rc + st * kRingCodeBytes);
    const uint32_t sw = lds32(rs + st * kRingScaleBytes);
    mma_tile<NT, kBig>(w, (g & 1) ? (sw >> 16) : (sw & 0xFFFFu), xa, acc);
  }
}

// ---- Activations in the MMA's K order (the warp-specialized kernels' B) ----

// The 64-wide K tile of one BF16 row (128 contiguous bytes at src) with its
// words moved where the MMA reads them (host/mxfp4_bits.h, mma_word_of).
__device__ __forceinline__ void load_row_tile_mma_order(const uint4* src, uint32_t (&out)[32]) {
  uint32_t in[32];
#pragma unroll
  for (int q = 0; q < 8; ++q) {
    const uint4 v = src[q];
    in[4 * q] = v.x, in[4 * q + 1] = v.y, in[4 * q + 2] = v.z, in[4 * q + 3] = v.w;
  }
#pragma unroll
  for (int r = 0; r < 32; ++r) out[mma_word_of(r)] = in[r];
}

// Its 8 chunks of 16 bytes (8 K columns each) as row `row` of K tile `tile`
// in the chunk layout [K tile][chunk][rows rows].
__device__ __forceinline__ void store_row_tile_chunks(uint4* dst, size_t tile, size_t rows, size_t row,
                                                      const uint32_t (&out)[32]) {
#pragma unroll
  for (int c = 0; c < 8; ++c)
    dst[(tile * 8 + c) * rows + row] = make_uint4(out[4 * c], out[4 * c + 1], out[4 * c + 2], out[4 * c + 3]);
}

// ---- Bulk copies (cp.async.bulk completing on an mbarrier, sm_90) ----

__device__ __forceinline__ void mbar_init(uint32_t bar, uint32_t count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(bar), "r"(count) : "memory");
}
__device__ __forceinline__ void mbar_inval(uint32_t bar) {
  asm volatile("mbarrier.inval.shared::cta.b64 [%0];" ::"r"(bar) : "memory");
}
// Makes barrier initializations visible to the copy engine (async proxy).
__device__ __forceinline__ void fence_mbar_init() {
  asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
}
__device__ __forceinline__ void mbar_arrive_expect_tx(uint32_t bar, uint32_t bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(bar), "r"(bytes)
               : "memory");
}
// One arrival (no transaction bytes), e.g. a consumer giving a ring stage back.
__device__ __forceinline__ void mbar_arrive(uint32_t bar) {
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];" ::"r"(bar) : "memory");
}
// ---- Thread-block clusters (sm_90) ----

__device__ __forceinline__ uint32_t cluster_ctarank() {
  uint32_t r;
  asm volatile("mov.u32 %0, %%cluster_ctarank;" : "=r"(r));
  return r;
}
// One arrival on the barrier at shared-memory offset `bar` of CTA `rank` of
// the cluster (this CTA's own included). Default semantics (release, CTA
// scope), as CUTLASS's consumer release: a cluster-scope release compiles to
// a MEMBAR.ALL.GPU first (session 12's version, 55% slower). The PTX memory
// model would ask for cluster scope to order this with the peer's copy into
// the stage; the hazard is write-after-read on shared-memory reads that
// wgmma.wait_group has already completed.
__device__ __forceinline__ void mbar_arrive_cluster(uint32_t bar, uint32_t rank) {
  uint32_t remote;
  asm volatile("mapa.shared::cluster.u32 %0, %1, %2;" : "=r"(remote) : "r"(bar), "r"(rank));
  asm volatile("mbarrier.arrive.shared::cluster.b64 _, [%0];" ::"r"(remote) : "memory");
}
// Every thread of every CTA of the cluster (not .aligned: callers may have
// diverged lanes).
__device__ __forceinline__ void cluster_sync() {
  asm volatile("barrier.cluster.arrive.release;\nbarrier.cluster.wait.acquire;" ::: "memory");
}

// The same wait as mbar_wait with the loop in C++ (ptxas schedules around it;
// the warp-specialized kernels use this one).
__device__ __forceinline__ void mbar_wait_parity(uint32_t bar, uint32_t parity) {
  uint32_t done = 0;
  do {
    asm volatile(
        "{\n.reg .pred p;\nmbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\nselp.u32 %0, 1, 0, p;\n}\n"
        : "=r"(done)
        : "r"(bar), "r"(parity)
        : "memory");
  } while (!done);
}
// Spins until the barrier's phase of parity `parity` has completed.
__device__ __forceinline__ void mbar_wait(uint32_t bar, uint32_t parity) {
  asm volatile(
      "{\n .reg .pred done;\n"
      "MBAR_WAIT_LOOP:\n"
      " mbarrier.try_wait.parity.shared::cta.b64 done, [%0], %1;\n"
      " @!done bra MBAR_WAIT_LOOP;\n}\n" ::"r"(bar),
      "r"(parity)
      : "memory");
}
// `bytes` (multiple of 16) from global to this CTA's shared memory; completion
// is counted on `bar` (both addresses 16-byte aligned).
__device__ __forceinline__ void bulk_copy_g2s(uint32_t dst, const void* src, uint32_t bytes,
                                              uint32_t bar) {
  asm volatile(
      "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];" ::"r"(dst),
      "l"(src), "r"(bytes), "r"(bar)
      : "memory");
}

__device__ __forceinline__ uint32_t lds_u16(uint32_t a) {
  uint16_t v;
  asm volatile("ld.shared.u16 %0, [%1];" : "=h"(v) : "r"(a));
  return v;
}

// Per-warp bulk ring: kStages stages of kBulkTiles weight tiles each. Layout:
// [stages x kBulkTiles x 512 code bytes][stages x kBulkTiles x 32 scale bytes]
// [stages x 8-byte mbarrier], rounded up to 128 bytes.
constexpr int kBulkTiles = 4;
constexpr int bulk_ring_bytes(int stages) {
  return (stages * (kBulkTiles * (kTileCodeBytes + kTileScaleBytes) + 8) + 127) / 128 * 128;
}

// Same result as strip_mma, but one lane of the warp streams the strip's
// weights (tiles [kt0, kt1) are contiguous: codes and scales) into the warp's
// ring `ring` (bulk_ring_bytes(kStages), 16-byte aligned) with one bulk copy
// per stage and array, kStages stages ahead. So up to kStages x 2 KB per warp
// are in flight while the warp computes, with no registers held for them and
// two instructions per tile (LDS.128 + LDS.U16) instead of the two global
// loads. A stage is refilled as soon as its tiles are in registers. When
// `wait_prior_grid`, the first stages are requested before waiting for the
// previous kernel (programmatic dependent launch): activations may come from it.
template <int NT, bool kBig, int kStages>
__device__ __forceinline__ void strip_mma_bulk(const uint8_t* __restrict__ codes,
                                               const uint8_t* __restrict__ scales, int kt0, int kt1,
                                               const uint16_t* const (&rows)[NT], float (&acc)[NT][4],
                                               uint8_t* ring, bool wait_prior_grid = false) {
  constexpr int kStageCode = kBulkTiles * kTileCodeBytes, kStageScale = kBulkTiles * kTileScaleBytes;
  const int lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
  const uint32_t rc = smem_addr(ring);
  const uint32_t rs = rc + kStages * kStageCode;
  const uint32_t rb = rs + kStages * kStageScale;
  const int n = kt1 - kt0;
  const int stages = (n + kBulkTiles - 1) / kBulkTiles;
  const uint8_t* csrc = codes + size_t(kt0) * kTileCodeBytes;
  const uint8_t* ssrc = scales + size_t(kt0) * kTileScaleBytes;
  auto issue = [&](int j, int st) {  // stage j of the strip into ring slot st
    const int c = min(kBulkTiles, n - j * kBulkTiles);
    const uint32_t bar = rb + 8 * st;
    mbar_arrive_expect_tx(bar, c * (kTileCodeBytes + kTileScaleBytes));
    bulk_copy_g2s(rc + st * kStageCode, csrc + size_t(j) * kStageCode, c * kTileCodeBytes, bar);
    bulk_copy_g2s(rs + st * kStageScale, ssrc + size_t(j) * kStageScale, c * kTileScaleBytes, bar);
  };
  if (lane == 0) {
#pragma unroll
    for (int st = 0; st < kStages; ++st) mbar_init(rb + 8 * st, 1);
    fence_mbar_init();
#pragma unroll
    for (int st = 0; st < kStages; ++st)
      if (st < stages) issue(st, st);
  }
  __syncwarp();
  if (wait_prior_grid) griddep_wait();
  const uint16_t* xrow[NT];
#pragma unroll
  for (int nt = 0; nt < NT; ++nt) xrow[nt] = rows[nt] ? rows[nt] + kt0 * kTileK + 16 * t : nullptr;
  const uint32_t lane_code = lane * 16, lane_scale = (t >> 1) * 16 + 2 * g;
  int st = 0;
  uint32_t phase = 0;
  for (int i = 0; i < stages; ++i) {
    const int c = min(kBulkTiles, n - i * kBulkTiles);
    // The stage's activations (L1/L2 hits) before the wait, so that their
    // latency overlaps it instead of stalling every tile; the wait's memory
    // clobber keeps the compiler from sinking them.
    uint4 xa[kBulkTiles][NT][2];
#pragma unroll
    for (int u = 0; u < kBulkTiles; ++u) {
      if (u < c) load_tile_acts<NT>(xrow, u * kTileK, xa[u]);
    }
    mbar_wait(rb + 8 * st, phase);
    uint4 w[kBulkTiles];
    uint32_t sc[kBulkTiles];
#pragma unroll
    for (int u = 0; u < kBulkTiles; ++u) {
      w[u] = lds128(rc + st * kStageCode + u * kTileCodeBytes + lane_code);
      sc[u] = lds_u16(rs + st * kStageScale + u * kTileScaleBytes + lane_scale);
    }
    // Every lane has its copy of the stage: refill the slot kStages ahead.
    __syncwarp();
    if (lane == 0 && i + kStages < stages) issue(i + kStages, st);
#pragma unroll
    for (int u = 0; u < kBulkTiles; ++u) {
      if (u >= c) break;
      mma_tile<NT, kBig>(w[u], sc[u], xa[u], acc);
    }
#pragma unroll
    for (int nt = 0; nt < NT; ++nt)
      if (xrow[nt]) xrow[nt] += kBulkTiles * kTileK;
    if (++st == kStages) st = 0, phase ^= 1;
  }
  // Every issued stage was waited for: no copy is in flight. Invalidate the
  // barriers so the ring can be set up again (MoE strips call this per group).
  __syncwarp();
  if (lane == 0) {
#pragma unroll
    for (int s = 0; s < kStages; ++s) mbar_inval(rb + 8 * s);
  }
  __syncwarp();
}

__device__ __forceinline__ float bf16_bits_to_float(uint16_t b) {
  return __uint_as_float(uint32_t(b) << 16);
}

__device__ __forceinline__ uint16_t float_to_bf16_bits(float f) {
  return __bfloat16_as_ushort(__float2bfloat16_rn(f));
}

}  // namespace mx::cuda::dev
