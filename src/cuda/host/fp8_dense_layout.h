// The weight layout of the dense W4A4 GEMM on FP8 tensor cores (kernel 11's
// FP8 variant, mxfp4_gemm_ws.cu; docs/w4a4-fp8.md "Dense"). It is the MXFP4
// kernel layout (host/mxfp4_bits.h: strips of 16 rows, K tiles of 64, lane
// l = 4g + t owning 16 bytes per tile = rows g and g + 8 x real columns
// 16t .. 16t + 15, the same scale array) with only the bits inside each
// lane's 16 bytes moved: the BF16 layout places codes for a register dequant,
// which costs the FP8 fold ~25 instructions per word (fold_word). Here word
// 2s + h of a lane holds the 8 codes of row g + 8h that become the two E4M3x4
// A registers of k32 step s (a0/a2 for row g, a1/a3 for row g + 8):
//   * register half r (0: a0/a1, 1: a2/a3), byte i: lane-local real column
//     j = 8s + 4r + i;
//   * its magnitude (3 bits) at word bits 4(4r + i) .. +2: the word masked
//     with 0x77777777 is a PRMT selector for r = 0 and, shifted by 16, for
//     r = 1 (selector bit 3 must be clear);
//   * its sign at bit 8i + 7 for r = 0 (the word's own sign positions) and
//     8i + 3 for r = 1 (a shift of 4 puts them there).
// So a word becomes its two registers in 7 integer instructions
// (fp8_dense_word_to_e4m3), against the per-row fold table of its block.
#pragma once
#include <cstdint>

#include "cuda/host/fp8_fold.h"
#include "cuda/host/host_device.h"
#include "cuda/host/mxfp4_bits.h"

namespace mx::cuda {

// FP8 MMA column (within a 64-wide tile: two k32 steps) of real column kin.
// Lane t's byte i of register half r of step s is MMA column
// 32s + 16r + 4t + i and holds real column 16t + 8s + 4r + i. Activations
// are written in this order (B's K order), so A and B agree.
constexpr MX_HD int fp8_dense_mma_col(int kin) {
  const int t = kin >> 4, s = (kin >> 3) & 1, r = (kin >> 2) & 1, i = kin & 3;
  return 32 * s + 16 * r + 4 * t + i;
}

// Where lane-local real column j (0..15) of row half h (0: row g, 1: g + 8)
// lives in the lane's four words.
struct Fp8DenseSlot {
  int word, mag_bit, sign_bit;
};
constexpr MX_HD Fp8DenseSlot fp8_dense_slot(int h, int j) {
  const int s = (j >> 3) & 1, r = (j >> 2) & 1, i = j & 3;
  return {2 * s + h, 4 * (4 * r + i), r == 0 ? 8 * i + 7 : 8 * i + 3};
}

// One lane's 16 bytes of a tile: kernel layout (host/mxfp4_bits.h) in, FP8
// dense layout out. Code c of word kk of the kernel layout is row half c & 1,
// lane-local column 4kk + 2((c & 3) >> 1) + (c >> 2) (kernel_code_slot).
MX_HD void fp8_dense_repack_lane(const uint32_t (&in)[4], uint32_t (&out)[4]) {
  for (int w = 0; w < 4; ++w) out[w] = 0;
  for (int kk = 0; kk < 4; ++kk)
    for (int c = 0; c < 8; ++c) {
      const uint32_t code = code_of(in[kk], c);
      const Fp8DenseSlot sl = fp8_dense_slot(c & 1, 4 * kk + 2 * ((c & 3) >> 1) + (c >> 2));
      out[sl.word] |= ((code & 7u) << sl.mag_bit) | (((code >> 3) & 1u) << sl.sign_bit);
    }
}

// A word of the dense layout -> its two E4M3x4 registers (r = 0, r = 1),
// through the row's fold table {hi:lo} of the word's block.
MX_HD void fp8_dense_word_to_e4m3(uint32_t w, uint32_t lo, uint32_t hi, uint32_t& r0, uint32_t& r1) {
  const uint32_t m = w & 0x77777777u;
  r0 = fp8_byte_perm(lo, hi, m) | (w & 0x80808080u);
  r1 = fp8_byte_perm(lo, hi, m >> 16) | ((w << 4) & 0x80808080u);
}

// Whether block kb of row r (32 codes, kernel layout `codes` of a [N, K]
// weight) holds a nonzero magnitude. A block of zeros folds to zero bytes at
// any scale (byte 0 of every fold table is 0), so only blocks with a nonzero
// code need the fold table's reach (pack_fp8_dense_device's count).
MX_HD bool kernel_block_has_magnitude(const uint8_t* codes, int64_t r, int64_t kb, int64_t K) {
  for (int i = 0; i < kBlockK; ++i) {
    const CodeSlot sl = kernel_code_slot(r, kb * kBlockK + i, K);
    const uint32_t word = uint32_t(codes[sl.word_byte]) | uint32_t(codes[sl.word_byte + 1]) << 8 |
                          uint32_t(codes[sl.word_byte + 2]) << 16 | uint32_t(codes[sl.word_byte + 3]) << 24;
    if (code_of(word, sl.code) & 7u) return true;
  }
  return false;
}

// Per-row constants of the fold table: for a block scale s of a row whose
// largest scale is smax, fold_table_fast(s - smax) is
//   lo = s * kFp8DenseLoStep + lo_base(smax), hi = s * kFp8DenseHiStep + hi_base(smax)
// (one IMAD each per block in the kernel; valid for s - smax >=
// kFp8FoldFastMinDelta: no byte carries into the next).
constexpr uint32_t kFp8DenseLoStep = 0x08080800u;
constexpr uint32_t kFp8DenseHiStep = 0x08080808u;
MX_HD uint32_t fp8_dense_lo_base(int smax) {
  return 0x0C080000u + uint32_t(kFp8FoldShift + 6 - smax) * kFp8DenseLoStep;
}
MX_HD uint32_t fp8_dense_hi_base(int smax) {
  return 0x1C181410u + uint32_t(kFp8FoldShift + 6 - smax) * kFp8DenseHiStep;
}

}  // namespace mx::cuda
