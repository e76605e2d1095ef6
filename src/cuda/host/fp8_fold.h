// W4A4 on FP8 tensor cores (docs/w4a4-fp8.md): the per-32-block E8M0 scales
// of MXFP4 weights and activations are folded into FP8 E4M3 values, so an
// FP8 wgmma over a whole K range needs no per-block FP32 promotion.
//
// For a row (weight output row, or activation token row) with block scales
// s[b] and row maximum smax = max_b s[b], block b's E2M1 value q becomes the
// E4M3 value q * 2^(d + c) with d = s[b] - smax <= 0 and c = kFp8FoldShift.
// The row's true values are then E4M3 * 2^(smax - 127 - c), so the product of
// a weight row and a token row is acc * 2^(smax_w - 127 - c) * 2^(smax_x - 127 - c).
//
// Exactness: E2M1 magnitudes are {0, .5, 1, 1.5, 2, 3, 4, 6}: one mantissa
// bit over exponents -1..2. E4M3 holds one-mantissa-bit values exactly down
// to 1.5 * 2^-8 = 3 * 2^-9 (its subnormal step is 2^-9) and 2^-9, so every
// code is exact when 0.5 * 2^(d+c) >= 2^-9, i.e. d + c >= -8: with c = 6,
// d >= -14 (kFp8FoldMinExactDelta). c = 6 is the largest shift that keeps
// 6 * 2^c = 384 <= 448 (E4M3's largest finite value). Blocks further below
// their row's maximum round to nearest even on the E4M3 grid (and finally
// flush to zero); the bench counts them.
//
// Header-only pieces are shared by the kernels (MX_HD); the .cc holds the
// slow reference versions the tests and the bench compare against.
#pragma once
#include <cstdint>

#include "cuda/host/mxfp4_bits.h"

namespace mx::cuda {

constexpr int kFp8FoldShift = 6;             // c
constexpr int kFp8FoldMinExactDelta = -14;   // smallest d at which every code is exact
// Smallest d for which fold_table_fast is valid (every nonzero code a normal
// E4M3: 0.5 * 2^(d+c) >= 2^-6).
constexpr int kFp8FoldFastMinDelta = -11;

// Byte permute as PRMT in its default mode: byte i of the result is byte
// (sel >> 4i) & 7 of the 8-byte pool {b:a} (selector bit 3 must be clear:
// PRMT would replicate a sign there).
MX_HD uint32_t fp8_byte_perm(uint32_t a, uint32_t b, uint32_t sel) {
#if defined(__CUDA_ARCH__)
  return __byte_perm(a, b, sel);
#else
  const uint64_t pool = (uint64_t(b) << 32) | a;
  uint32_t r = 0;
  for (int i = 0; i < 4; ++i) {
    const uint32_t n = (sel >> (4 * i)) & 0xF;
    uint32_t v = uint32_t(pool >> (8 * (n & 7))) & 0xFF;
    if (n & 8) v = (v & 0x80) ? 0xFF : 0;
    r |= v << (8 * i);
  }
  return r;
#endif
}

// The fold table of one block: byte m (m = E2M1 magnitude code 0..7) of
// {hi:lo} is the E4M3 byte of E2M1(m) * 2^(d + c), for
// kFp8FoldFastMinDelta <= d <= 0. Codes 2..7 are (m << 2) plus the exponent
// step (d + c + 6) << 3 (E2M1 -> E4M3 is byte = mag << 2 at a 2^-6 factor);
// code 1 (0.5) is a power of two: exponent field d + c + 6, mantissa 0.
MX_HD void fold_table_fast(int d, uint32_t& lo, uint32_t& hi) {
  const uint32_t step = uint32_t(d + kFp8FoldShift + 6) << 3;
  lo = 0x0C080000u + step * 0x01010100u;
  hi = 0x1C181410u + step * 0x01010101u;
}

// One word of the MXFP4 kernel layout -> two E4M3x4 registers: byte i of
// `row_g` is code 2i of the word (host/mxfp4_bits.h: registers a0/a2, row g)
// folded with row g's table, byte i of `row_g8` code 2i + 1's (a1/a3, row
// g + 8) with row g + 8's. Codes 0, 2, 4, 6 hold real columns 4kk + {0, 2, 1,
// 3} of the lane's 16 (fp8_logical_col). The codes are first moved where the
// BF16 dequant wants them (e2m1_word_bits: magnitude at bits 6..8 and 22..24,
// sign at 15 and 31 of each register, nothing else set); from there the four
// magnitudes of a row become a PRMT selector (one nibble each, bit 3 clear)
// that picks table bytes, and the signs are OR-ed in at bit 8i + 7.
// One row's four codes from two dequant registers: `even` holds output bytes
// 0 (low half) and 2 (high half), `odd` bytes 1 and 3.
MX_HD uint32_t fold_row(uint32_t even, uint32_t odd, uint32_t t_lo, uint32_t t_hi) {
  // Magnitudes of bytes 0, 1 into byte 0 of `mags` (nibbles 0, 1), of bytes
  // 2, 3 into its byte 2; the signs that the shifts carry along land in bytes
  // 1 and 3, which the selector drops.
  const uint32_t mags = (even >> 6) | (odd >> 2);
  const uint32_t sel = fp8_byte_perm(mags, 0, 0x20);
  const uint32_t signs = ((even >> 8) & 0x00800080u) | (odd & 0x80008000u);
  return fp8_byte_perm(t_lo, t_hi, sel) | signs;
}

MX_HD void fold_word(uint32_t w, uint32_t g_lo, uint32_t g_hi, uint32_t g8_lo, uint32_t g8_hi,
                     uint32_t& row_g, uint32_t& row_g8) {
  uint32_t bits[4];
  e2m1_word_bits(w, bits);
  row_g = fold_row(bits[0], bits[2], g_lo, g_hi);
  row_g8 = fold_row(bits[1], bits[3], g8_lo, g8_hi);
}

// Position in the FP8 MMA's K order (within a 64-wide tile: two k32 steps)
// of real column kin (0..63). fold_word turns word kk of lane t into A
// register a0/a1 (kk even) or a2/a3 (kk odd) of k32 step kk / 2; byte i of
// those registers is MMA column 4t + i (+16 for a2/a3) and holds real column
// 16t + 4kk + {0, 2, 1, 3}[i]. Activations are written in this order.
constexpr MX_HD int fp8_logical_col(int kin) {
  const int t = kin >> 4, kk = (kin >> 2) & 3, pos = kin & 3;
  const int i = pos == 1 ? 2 : pos == 2 ? 1 : pos;  // {0,2,1,3} is its own inverse
  return 32 * (kk >> 1) + 16 * (kk & 1) + 4 * t + i;
}

// 2^e as a float for e in [-149, 127] (subnormals below -126).
MX_HD float fp8_pow2(int e) {
  if (e >= -126) {
    const uint32_t bits = uint32_t(e + 127) << 23;
#if defined(__CUDA_ARCH__)
    return __uint_as_float(bits);
#else
    return __builtin_bit_cast(float, bits);
#endif
  }
  const uint32_t bits = 1u << (e + 149);
#if defined(__CUDA_ARCH__)
  return __uint_as_float(bits);
#else
  return __builtin_bit_cast(float, bits);
#endif
}

// Factor that turns a row's folded E4M3 values back into real ones:
// 2^(smax - 127 - c). The output of a folded product is acc times the
// factors of both rows (two multiplies keep each factor a normal-range float).
MX_HD float fold_unscale(int smax) { return fp8_pow2(smax - 127 - kFp8FoldShift); }

// Reference (host) versions.

// E4M3 byte of E2M1(code) * 2^(d + c), sign from the code's bit 3, rounded
// to nearest even when not exact (d < kFp8FoldMinExactDelta), flushing to
// (signed) zero below half the smallest subnormal.
uint8_t fold_code_reference(uint8_t code, int d);
// The table of fold_table_fast for any d <= 0 (slow path of the kernels).
void fold_table_reference(int d, uint32_t& lo, uint32_t& hi);
// Whether every code folds exactly at this d.
bool fold_is_exact(int d);
// Largest scale byte of a row's `blocks` block scales (checkpoint layout row).
uint8_t row_max_scale(const uint8_t* scales, int64_t blocks);

}  // namespace mx::cuda
