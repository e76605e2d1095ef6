// Narrow BF16 warpgroup MMAs with A from registers (RS form), for few tokens
// and for the MoE prefill's partial pair tiles: wgmma.m64n16k16, m64n32k16,
// m64n48k16 and m64n96k16 (wgmma_rs.cuh has n = 64..256). Same operand
// conventions as wgmma_rs.cuh: d is the accumulator fragment of m64nNk16
// (N / 2 floats per thread: d[4 i + c] = row g + 8 (c >> 1) of the warp's 16,
// column 8 i + 2 t + (c & 1)), a the per-warp A fragment of mma.m16n8k16, B
// read from shared memory through a descriptor.
#pragma once
#include <cstdint>

#include "cuda/wgmma_rs.cuh"

namespace mx::cuda::dev {

__device__ __forceinline__ void wgmma_rs_bf16_n16(float (&d)[8], const uint32_t (&a)[4], uint64_t desc) {
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, 1, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n16k16.f32.bf16.bf16 "
      "{%0, %1, %2, %3, %4, %5, %6, %7}, {%8, %9, %10, %11}, %12, p, 1, 1, 0;\n}\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc)
      : "memory");
}

__device__ __forceinline__ void wgmma_rs_bf16_n32(float (&d)[16], const uint32_t (&a)[4], uint64_t desc) {
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, 1, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n32k16.f32.bf16.bf16 "
      "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15}, "
      "{%16, %17, %18, %19}, %20, p, 1, 1, 0;\n}\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]),
        "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc)
      : "memory");
}

__device__ __forceinline__ void wgmma_rs_bf16_n48(float (&d)[24], const uint32_t (&a)[4], uint64_t desc) {
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, 1, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n48k16.f32.bf16.bf16 "
      "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23}, "
      "{%24, %25, %26, %27}, %28, p, 1, 1, 0;\n}\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]),
        "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]),
        "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc)
      : "memory");
}

// n = 96: the wide MoE gate_up's second B box of up to 96 pair rows
// (Params::tail96).
__device__ __forceinline__ void wgmma_rs_bf16_n96(float (&d)[48], const uint32_t (&a)[4], uint64_t desc) {
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, 1, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n96k16.f32.bf16.bf16 "
      "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47}, "
      "{%48, %49, %50, %51}, %52, p, 1, 1, 0;\n}\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]),
        "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]),
        "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]),
        "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]),
        "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]),
        "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc)
      : "memory");
}

// d += A * B for m64 n(NT) k16, NT = 16, 32 or 64 tokens (d: NT / 2 floats).
template <int NT>
__device__ __forceinline__ void wgmma_rs_bf16_tokens(float (&d)[NT / 2], const uint32_t (&a)[4],
                                                     uint64_t desc) {
  if constexpr (NT == 16) wgmma_rs_bf16_n16(d, a, desc);
  else if constexpr (NT == 32) wgmma_rs_bf16_n32(d, a, desc);
  else {
    static_assert(NT == 64, "compiled token widths: 16, 32, 64");
    wgmma_rs_bf16<1>(d, a, desc);
  }
}

// d[0 .. kCols / 2) += A * B for m64 n(kCols) k16, kCols = 32, 48, 64, 96, 128,
// 192 or 256 (d may be longer: the MoE prefill keeps one array for its widths).
template <int kCols, int N>
__device__ __forceinline__ void wgmma_rs_bf16_cols(float (&d)[N], const uint32_t (&a)[4], uint64_t desc) {
  static_assert(N >= kCols / 2, "accumulator array too small");
  if constexpr (kCols == 32) wgmma_rs_bf16_n32(reinterpret_cast<float(&)[16]>(d), a, desc);
  else if constexpr (kCols == 48) wgmma_rs_bf16_n48(reinterpret_cast<float(&)[24]>(d), a, desc);
  else if constexpr (kCols == 96) wgmma_rs_bf16_n96(reinterpret_cast<float(&)[48]>(d), a, desc);
  else {
    static_assert(kCols % 64 == 0 && kCols <= 256, "compiled widths: 32, 48, 64, 96, 128, 192, 256");
    wgmma_rs_bf16<kCols / 64>(d, a, desc);
  }
}

}  // namespace mx::cuda::dev
