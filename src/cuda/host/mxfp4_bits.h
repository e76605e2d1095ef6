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
//   * in word w[kk], register r (a0..a3 of the fragment) keeps its low BF16's
//     code in nibble r and its high BF16's code in nibble r + 4;
//   * the tile's 32 scale bytes follow a separate array, byte b*16 + 2g + h =
//     scale of row g + 8h, block 2j + b, so lane (g, t) loads one 16-bit word at
//     b = t / 2 (row g in the low byte, row g + 8 in the high byte).
#pragma once
#include <cstdint>

#if defined(__CUDACC__)
#define MX_HD __host__ __device__ __forceinline__
#else
#define MX_HD inline
#endif

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

// Where the code of weight (row r, column k) lives, in the kernel layout:
// byte offset and nibble (0 = low) within the tensor's code bytes.
struct CodeSlot {
  int64_t byte;
  int nibble;
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
  return {tile * kTileCodeBytes + lane * 16 + kk * 4 + (reg + 4 * half) / 2,
          (reg + 4 * half) & 1};
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
    const int lane = int(s.byte) / 16, kk = int(s.byte % 16) / 4;
    const int n = int(s.byte % 4) * 2 + s.nibble;  // nibble of the word
    const int reg = n & 3, half = n >> 2, t = lane & 3;
    if (16 * kk + 2 * t + half + 8 * (reg >> 1) != mma_logical_col(kin)) return false;
  }
  return true;
}
static_assert(mma_logical_col_matches_layout(),
              "mma_logical_col disagrees with the kernel layout (kernel_code_slot)");

// Byte offset of the scale of (row r, block kb) in the kernel scale array.
MX_HD int64_t kernel_scale_slot(int64_t r, int64_t kb, int64_t K) {
  const int64_t strip = r / kStripRows, kt = kb / 2;
  const int row = int(r % kStripRows), b = int(kb & 1);
  const int64_t tile = strip * (K / kTileK) + kt;
  return tile * kTileScaleBytes + b * 16 + 2 * (row & 7) + (row >> 3);
}

// Register r (0..3) of a layout word as BF16x2 bits of (E2M1 value * 2^-126):
// E2M1's 3 magnitude bits land on BF16's two lowest exponent bits and its top
// mantissa bit, so codes 0..7 become exact BF16 numbers (0.5 a subnormal) with a
// fixed 2^-126 factor that the scale multiply removes.
MX_HD uint32_t e2m1_pair_bits(uint32_t word, int r) {
  const uint32_t x = word << (12 - 4 * r);
  return (x & 0x80008000u) | ((x >> 6) & 0x01C001C0u);
}

// BF16 bits of the multiplier 2^(s - 1) that turns the value above into
// E2M1 * 2^(s - 127); valid for s <= kMaxSimpleScale.
MX_HD uint16_t scale_multiplier_bits(uint32_t s) { return uint16_t((s + 126u) << 7); }

// For s > kMaxSimpleScale: first multiply by 2^127 (= the bits above at 128),
// then by 2^(s - 128), whose BF16 bits this returns.
MX_HD uint16_t big_scale_second_bits(uint32_t s) { return uint16_t((s - 128u + 127u) << 7); }

// Inverse of kernel_code_slot: which (row, column) the code in nibble `nibble`
// of layout byte `byte` belongs to. Used by the device re-layout kernel, which
// gathers (one thread per output byte, no write races).
MX_HD void kernel_code_source(int64_t byte, int nibble, int64_t K, int64_t& r, int64_t& k) {
  const int64_t KT = K / kTileK;
  const int64_t tile = byte / kTileCodeBytes;
  const int in_tile = int(byte % kTileCodeBytes);
  const int lane = in_tile / 16, kk = (in_tile % 16) / 4;
  const int n = (in_tile % 4) * 2 + nibble;  // nibble 0..7 of the word
  const int reg = n & 3, half = n >> 2;
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
