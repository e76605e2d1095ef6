// MLA decode attention in the absorbed form over the paged latent KV cache
// (docs/mla-decode.md). One query token per sequence, one shared KV head whose
// rows are 576 wide ([c_kv 512 ; k_pe 64]); the values are the first 512
// entries of each cached row:
//   out[b, h, :] = softmax_t(scale * q[b, h, :] . k(t)) . k(t)[0:512]
// over the context_lens[b] cached tokens of sequence b (the new token already
// stored). Plain C++ header: raw device pointers and a stream, so the engine's
// CudaAttention (src/cuda/backend) and the benchmark call it alike.
//
// Layout contract (src/cuda/backend/cuda_attention.h):
//   q            F32 [batch, heads, 576]
//   k_cache      BF16 or FP8 E4M3 [num_blocks, block_size, 1, 576]
//   k_scale      F32 [num_blocks, block_size] for FP8 (value = fp8 * scale), else null
//   block_tables I32 [batch, max_blocks] (entries past a sequence's blocks are never read)
//   context_lens I32 [batch], each >= 1
//   out          F32 [batch, heads, 512]
// Any block size works (the kernel gathers 64-token tiles row by row); 64 and
// above keep every 16-byte copy of a tile inside one block's contiguous run.
//
// Graph-capturable: no host synchronization and no allocation; split-KV
// partials go to a caller-provided workspace of mla_decode_workspace_bytes().
#pragma once
#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

namespace mx::cuda {

enum class MlaKvDtype { kBF16, kFP8E4M3 };

// Which kernel runs (docs/mla-decode.md). kAuto picks by shape (resolve_kernel
// in mla_decode.cu); kFp8Fused needs an FP8 cache and at most 16 heads,
// kFp8Wgmma (both products on FP8 wgmma) an FP8 cache and at most 8 heads
// (mla_decode throws otherwise).
enum class MlaDecodeKernel { kAuto, kTiled, kFp8Fused, kFp8Wgmma };

inline constexpr int kMlaHeadDim = 576;   // kv_lora 512 + rope 64
inline constexpr int kMlaValueDim = 512;  // kv_lora

struct MlaDecodeShape {
  int batch = 0;
  int heads = 0;       // any >= 1; groups of 16, 32 or 64 heads per CTA
  int max_blocks = 0;  // block table row width; max_blocks * block_size bounds every context
  int block_size = 0;
  MlaKvDtype kv_dtype = MlaKvDtype::kBF16;
};

struct MlaDecodeArgs {
  MlaDecodeShape shape;
  const float* q = nullptr;
  const void* k_cache = nullptr;
  const float* k_scale = nullptr;
  const int32_t* block_tables = nullptr;
  const int32_t* context_lens = nullptr;
  float softmax_scale = 1.0f;
  float* out = nullptr;
  void* workspace = nullptr;  // mla_decode_workspace_bytes(shape, num_splits) bytes, 16-byte aligned
  // KV splits per sequence (flash-decoding); 0 = mla_decode_default_splits.
  int num_splits = 0;
  MlaDecodeKernel kernel = MlaDecodeKernel::kAuto;
  // Benchmark only (mla_decode_bench's stage timing): leave stages out, which
  // makes the result wrong. 0 in every real call.
  int profile_skip = 0;
};

inline constexpr int kMlaSkipFp8Decode = 1;  // FP8 tiles are not decoded (scores use stale data; kTiled only)
inline constexpr int kMlaSkipValues = 2;     // no P.V products

// Splits chosen from the shape alone (host values only, so a captured graph
// replays with the same choice): enough CTAs to fill the GPU's multiprocessors
// in whole waves, no split shorter than one 64-token tile.
int mla_decode_default_splits(const MlaDecodeShape& shape, int num_sms);
// The same for a given kernel choice (kAuto: the kernel mla_decode would pick).
int mla_decode_default_splits(const MlaDecodeShape& shape, int num_sms, MlaDecodeKernel kernel);

// Workspace for split partials (0 when num_splits resolves to 1).
size_t mla_decode_workspace_bytes(const MlaDecodeShape& shape, int num_splits, int num_sms);

// Enqueues the decode (and the split combine) on `stream`. Throws
// mx::InvalidArgument on a shape or pointer it cannot run; returns the CUDA error of the
// launches (cudaSuccess when both were queued).
cudaError_t mla_decode(const MlaDecodeArgs& args, int num_sms, cudaStream_t stream);

}  // namespace mx::cuda
