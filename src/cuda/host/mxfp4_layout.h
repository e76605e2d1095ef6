// Load-time re-layout of MXFP4 weights for the CUDA kernels (mxfp4_bits.h
// defines the layout). Host functions; the device has an equivalent kernel
// (mx_cuda: pack_mxfp4_device) for weights that are already on the GPU.
#pragma once
#include <cstdint>
#include <span>
#include <vector>

namespace mx::cuda {

// A weight [N, K] in the kernel layout: N/16 strips x K/64 tiles, 512 code
// bytes and 32 scale bytes per tile.
struct PackedMxfp4 {
  int64_t rows = 0, cols = 0;      // N, K
  std::vector<uint8_t> codes;      // N * K / 2 bytes
  std::vector<uint8_t> scales;     // N * K / 32 bytes
  bool big_scales = false;         // some scale byte > kMaxSimpleScale
};

// Checks shapes (N % 16, K % 64) and scale bytes (255 = NaN is refused: the
// kernels would silently turn it into a large number), then re-lays out
// `codes` [N, K/2] (two E2M1 per byte, element 2j low nibble) and `scales`
// [N, K/32] (E8M0). Throws mx::InvalidArgument on bad input, naming `what`.
PackedMxfp4 pack_mxfp4(std::span<const uint8_t> codes, std::span<const uint8_t> scales,
                       int64_t N, int64_t K, const char* what = "weight");

// The inverse of pack_mxfp4: back to the checkpoint's [N, K/2] and [N, K/32].
void unpack_mxfp4(const PackedMxfp4& packed, std::vector<uint8_t>& codes,
                  std::vector<uint8_t>& scales);

// Fused-MoE gate_up weights: the checkpoint stores [2I, H] with the I gate rows
// first and the I up rows after them. The kernel wants each 16-row strip to
// hold gate rows 8s..8s+7 then up rows 8s..8s+7, so that one thread ends up
// with gate and up of the same output in its accumulators (SiLU(gate) * up in
// registers). Returns the row order: result[new_row] = old_row.
std::vector<int64_t> gate_up_interleaved_rows(int64_t intermediate);

// Applies a row order (new_row -> old_row) to [N, K/2] codes and [N, K/32]
// scales, before pack_mxfp4.
void permute_rows(std::span<const uint8_t> codes, std::span<const uint8_t> scales, int64_t N,
                  int64_t K, std::span<const int64_t> order, std::vector<uint8_t>& codes_out,
                  std::vector<uint8_t>& scales_out);

}  // namespace mx::cuda
