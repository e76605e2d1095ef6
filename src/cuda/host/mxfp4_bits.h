// Bit-level definitions shared by the host re-layout code and the CUDA kernels
// (header-only, no CUDA types): where each E2M1 code of a weight lives in the
// kernel layout, and the register tricks that turn codes into BF16.
//
// Kernel layout ("strip/tile", see docs/kernels.md):
//   * rows are grouped in strips of 16, K in tiles of 64 (two E8M0 blocks);
//   * tile (strip i, k-tile j) is 512 code bytes at ((i * KT) + j) * 512, where
//     KT = K / 64; lane l = 4g + t of a warp owns bytes [16l, 16l + 16): the four
//     32-bit words w[kk] (kk = 0..3 = the mma k16 step) hold the A fragment of
//     mma.m16n8k16 for rows g and g + 8;
//   * K is permuted inside a tile so that lane t's 32 K values are contiguous:
//     logical MMA column c of step kk maps to real k = 16t + 4kk + {0,1,2,3} for
//     c = {2t, 2t+1, 2t+8, 2t+9}. Activations then need no reordering: lane t
//     reads X[token][64j + 16t .. 64j + 16t + 15] with two 16-byte loads;
//   * in word w[kk], the 8 codes of the fragment registers a0..a3 (code c =
//     r + 4 * half: register r, low/high BF16) sit at the bit positions of
//     code_bit (not in nibbles): placed so that the register dequant needs
//     ~9 integer instructions per word instead of ~16 (e2m1_word_bits);
//   * the tile's 32 scale bytes follow a separate array, byte b*16 + 2g + h =
//     scale of row g + 8h, block 2j + b, so lane (g, t) loads one 16-bit word at
//     b = t / 2 (row g in the low byte, row g + 8 in the high byte).
#pragma once
#include <cstdint>

#include "cuda/host/host_device.h"

namespace mx::cuda {

constexpr int kStripRows = 16;
constexpr int kTileK = 64;
constexpr int kTileCodeBytes = kStripRows * kTileK / 2;   // 512
constexpr int kTileScaleBytes = kStripRows * kTileK / 32;  // 32
constexpr int kBlockK = 32;
// E8M0 byte 255 is NaN for a whole block; the re-layout refuses it (see
// pack_mxfp4), so kernels never see it.
constexpr uint8_t kE8m0Nan = 255;
// Largest scale byte the one-multiply dequant handles (2^(s-1) must be a
// finite BF16); larger ones select the two-multiply kernel variant.
constexpr uint8_t kMaxSimpleScale = 128;

// ---- Where the 8 codes of a layout word sit (docs/kernels.md) ----
// Code c = r + 4 * half of a word belongs to fragment register a_r, low
// (half 0) or high (half 1) BF16. The register dequant wants each code's bits
// at BF16 bits 6, 7, 8 (mantissa, e0, e1 -> E2M1 * 2^-126) and 15 (sign) of
// its half: mask kBf16CodeMask. A rotation moves a whole register's codes there
// at once: a0 = w & mask, a1 = rotl(w, 4) & mask, a2 = rotl(w, 10) & mask. Four
// translates of {6, 7, 8, 15} cannot tile 16 bit positions, so a3 takes its
// mantissa, e0 and sign bits from rotl(w, 6) and its e1 bits from rotl(w, 14).
// code_bit(c, i) = word bit of bit i of code c (0: mantissa, 1: e0, 2: e1,
// 3: sign) follows from that:
//   c:  0 {6,7,8,15}   1 {2,3,4,11}     2 {28,29,30,5}   3 {0,1,26,9}
//       4 {22,23,24,31} 5 {18,19,20,27} 6 {12,13,14,21}  7 {16,17,10,25}
constexpr uint32_t kBf16CodeMask = 0x81C081C0u;
constexpr uint32_t kReg3Rot6Mask = 0x80C080C0u;   // a3: sign, e0, mantissa
constexpr uint32_t kReg3Rot14Mask = 0x01000100u;  // a3: e1

// Rotation of the word that brings bit i of register r's codes into place.
constexpr MX_HD int code_rotation(int r, int i) {
  return r == 0 ? 0 : r == 1 ? 4 : r == 2 ? 10 : (i == 2 ? 14 : 6);
}

constexpr MX_HD int code_bit(int c, int i) {
  const int r = c & 3, half = c >> 2;
  const int target = (i == 3 ? 15 : 6 + i) + 16 * half;  // its BF16 bit
  return (target - code_rotation(r, i)) & 31;
}

// The word bits of E2M1 code `code` (4 bits) placed as code c of a word, and
// the inverse: code c of a word.
constexpr MX_HD uint32_t place_code(uint32_t code, int c) {
  uint32_t w = 0;
  for (int i = 0; i < 4; ++i) w |= ((code >> i) & 1u) << code_bit(c, i);
  return w;
}
constexpr MX_HD uint32_t code_of(uint32_t word, int c) {
  uint32_t code = 0;
  for (int i = 0; i < 4; ++i) code |= ((word >> code_bit(c, i)) & 1u) << i;
  return code;
}

// Where the code of weight (row r, column k) lives in the kernel layout: the
// byte offset of its 32-bit word (a multiple of 4) within the tensor's code
// bytes, and its code index c (0..7) in the word.
struct CodeSlot {
  int64_t word_byte;
  int code;
};

constexpr MX_HD CodeSlot kernel_code_slot(int64_t r, int64_t k, int64_t K) {
  const int64_t strip = r / kStripRows, kt = k / kTileK;
  const int row = int(r % kStripRows), kin = int(k % kTileK);
  const int g = row & 7, hi_row = row >> 3;        // rows g and g + 8
  const int t = kin >> 4, kk = (kin >> 2) & 3;     // lane t, k16 step kk
  const int pos = kin & 3;                          // 0,1 -> a0/a1; 2,3 -> a2/a3
  const int reg = (pos >> 1) * 2 + hi_row;          // a0 a1 a2 a3
  const int half = pos & 1;                         // low / high BF16 of reg
  const int lane = 4 * g + t;
  const int64_t tile = strip * (K / kTileK) + kt;
  return {tile * kTileCodeBytes + lane * 16 + kk * 4, reg + 4 * half};
}

// Position in the MMA's k order (16 * step kk + column of the k16 step) of real
// column kin (0..63) inside a 64-wide tile: real 16t + 4kk + j holds step kk,
// column {2t, 2t+1, 2t+8, 2t+9}[j]. Operands read by the tensor cores in
// their own order (wgmma's B from shared memory) must be stored permuted so.
constexpr MX_HD int mma_logical_col(int kin) {
  const int t = kin >> 4, kk = (kin >> 2) & 3, j = kin & 3;
  return 16 * kk + 2 * t + (j & 1) + 8 * (j >> 1);
}

// mma_logical_col agrees with where kernel_code_slot puts each code: the word
// of step kk, fragment register a0/a2 (columns 2t, 2t+1 / 2t+8, 2t+9) of lane t.
constexpr bool mma_logical_col_matches_layout() {
  for (int kin = 0; kin < kTileK; ++kin) {
    const CodeSlot s = kernel_code_slot(0, kin, kTileK);
    const int lane = int(s.word_byte) / 16, kk = int(s.word_byte % 16) / 4;
    const int reg = s.code & 3, half = s.code >> 2, t = lane & 3;
    if (16 * kk + 2 * t + half + 8 * (reg >> 1) != mma_logical_col(kin)) return false;
  }
  return true;
}
static_assert(mma_logical_col_matches_layout(),
              "mma_logical_col disagrees with the kernel layout (kernel_code_slot)");

// The same order for whole 32-bit words of a row's 64-wide K tile in memory
// (real columns 2r, 2r + 1 in word r): the word's MMA position is
// mma_logical_col(2r) / 2 = 8 kk + t + 4 (r % 2) with lane t = r / 8 and step
// kk = (r / 2) % 4. Used where activations are copied into wgmma's K order.
constexpr MX_HD int mma_word_of(int r) { return 8 * ((r >> 1) & 3) + (r >> 3) + 4 * (r & 1); }

constexpr bool mma_word_of_matches_columns() {
  for (int r = 0; r < kTileK / 2; ++r)
    if (2 * mma_word_of(r) != mma_logical_col(2 * r) || 2 * mma_word_of(r) + 1 != mma_logical_col(2 * r + 1))
      return false;
  return true;
}
static_assert(mma_word_of_matches_columns(), "mma_word_of must move word r where mma_logical_col puts its columns");

// Byte offset of the scale of (row r, block kb) in the kernel scale array.
MX_HD int64_t kernel_scale_slot(int64_t r, int64_t kb, int64_t K) {
  const int64_t strip = r / kStripRows, kt = kb / 2;
  const int row = int(r % kStripRows), b = int(kb & 1);
  const int64_t tile = strip * (K / kTileK) + kt;
  return tile * kTileScaleBytes + b * 16 + 2 * (row & 7) + (row >> 3);
}

constexpr MX_HD uint32_t rotl32(uint32_t x, int n) {
  return n == 0 ? x : (x << n) | (x >> (32 - n));  // one SHF.L.W on the GPU
}

// The four fragment registers of a layout word as BF16x2 bits of (E2M1 value *
// 2^-126): E2M1's 3 magnitude bits land on BF16's two lowest exponent bits and
// its top mantissa bit, so codes 0..7 become exact BF16 numbers (0.5 a
// subnormal) with a fixed 2^-126 factor that the scale multiply removes.
// 4 rotations + 5 LOP3 per word (the nibble layout before 2026-12-01 needed 2
// shifts + 2 LOP3 per register).
constexpr MX_HD void e2m1_word_bits(uint32_t word, uint32_t (&bits)[4]) {
  bits[0] = word & kBf16CodeMask;
  bits[1] = rotl32(word, 4) & kBf16CodeMask;
  bits[2] = rotl32(word, 10) & kBf16CodeMask;
  bits[3] = (rotl32(word, 6) & kReg3Rot6Mask) | (rotl32(word, 14) & kReg3Rot14Mask);
}

// The BF16 bits (one half) that e2m1_word_bits must give for a code.
constexpr MX_HD uint32_t e2m1_half_bits(uint32_t code) {
  return ((code & 8u) << 12) | ((code & 7u) << 6);
}

// The placement is a partition of the word's 32 bits ...
constexpr bool code_bits_partition_the_word() {
  uint32_t seen = 0;
  for (int c = 0; c < 8; ++c)
    for (int i = 0; i < 4; ++i) {
      const uint32_t b = 1u << code_bit(c, i);
      if (seen & b) return false;
      seen |= b;
    }
  return seen == 0xFFFFFFFFu;
}
static_assert(code_bits_partition_the_word(), "code_bit: two codes share a word bit");

// ... and e2m1_word_bits decodes every code value at every code index, whatever
// the other 7 codes hold (each of the 16 values everywhere else).
constexpr bool e2m1_word_bits_decode_every_code() {
  for (uint32_t other = 0; other < 16; ++other)
    for (int c = 0; c < 8; ++c)
      for (uint32_t v = 0; v < 16; ++v) {
        uint32_t word = 0;
        for (int o = 0; o < 8; ++o) word |= place_code(o == c ? v : other, o);
        uint32_t bits[4] = {0, 0, 0, 0};
        e2m1_word_bits(word, bits);
        for (int o = 0; o < 8; ++o) {
          const uint32_t half = (bits[o & 3] >> (16 * (o >> 2))) & 0xFFFFu;
          if (half != e2m1_half_bits(o == c ? v : other)) return false;
        }
      }
  return true;
}
static_assert(e2m1_word_bits_decode_every_code(),
              "e2m1_word_bits does not decode the placement of code_bit");

// BF16 bits of the multiplier 2^(s - 1) that turns the value above into
// E2M1 * 2^(s - 127); valid for s <= kMaxSimpleScale.
MX_HD uint16_t scale_multiplier_bits(uint32_t s) { return uint16_t((s + 126u) << 7); }

// For s > kMaxSimpleScale: first multiply by 2^127 (= the bits above at 128),
// then by 2^(s - 128), whose BF16 bits this returns.
MX_HD uint16_t big_scale_second_bits(uint32_t s) { return uint16_t((s - 128u + 127u) << 7); }

// Inverse of kernel_code_slot: which (row, column) code `code` of the layout
// word at byte `word_byte` belongs to. Used by the device re-layout kernel,
// which gathers (one thread per output word, no write races).
MX_HD void kernel_code_source(int64_t word_byte, int code, int64_t K, int64_t& r, int64_t& k) {
  const int64_t KT = K / kTileK;
  const int64_t tile = word_byte / kTileCodeBytes;
  const int in_tile = int(word_byte % kTileCodeBytes);
  const int lane = in_tile / 16, kk = (in_tile % 16) / 4;
  const int reg = code & 3, half = code >> 2;
  const int hi_row = reg & 1, pos = (reg >> 1) * 2 + half;
  const int g = lane >> 2, t = lane & 3;
  r = (tile / KT) * kStripRows + g + 8 * hi_row;
  k = (tile % KT) * kTileK + 16 * t + 4 * kk + pos;
}

// Inverse of kernel_scale_slot.
MX_HD void kernel_scale_source(int64_t byte, int64_t K, int64_t& r, int64_t& kb) {
  const int64_t KT = K / kTileK;
  const int64_t tile = byte / kTileScaleBytes;
  const int in_tile = int(byte % kTileScaleBytes);
  const int b = in_tile / 16, g = (in_tile % 16) / 2, h = in_tile & 1;
  r = (tile / KT) * kStripRows + g + 8 * h;
  kb = (tile % KT) * 2 + b;
}

}  // namespace mx::cuda
