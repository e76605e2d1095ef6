// Launchers of the attention kernels (src/cuda/attention/*.cu) behind
// CudaAttention. Plain C++ header: raw device pointers and small structs, so
// cuda_attention.cc is compiled by the host compiler. Every launcher is
// asynchronous on `stream`; the caller checks cudaGetLastError and names the op.
//
// One description serves the paged cache and dense tensors: a KvView is "row
// r of a [rows, heads, dim]-shaped buffer", where a paged sequence maps its
// j-th token to row = block_table[j / block_size] * block_size + j % block_size
// and a dense tensor maps token j to row j (SeqLayout::block_tables null).
#pragma once
#include <cuda_runtime_api.h>

#include <cstdint>

namespace mx::cuda {

enum class KvType : int32_t { F32 = 0, BF16 = 1, FP8 = 2 };

// Elements of head h of row r start at data + r * row_stride + h * head_stride
// (in elements of `type`); `dim` of them are read. FP8 rows are multiplied by
// scale[r]. A latent cache's values are its key rows read with dim = v_dim.
struct KvView {
  const void* data = nullptr;
  const float* scale = nullptr;  // FP8 only: one F32 per row
  KvType type = KvType::F32;
  int32_t heads = 0, dim = 0, head_stride = 0;
  int64_t row_stride = 0;
};

// The sequences of a step as the kernels see them (device arrays), or one
// dense sequence (q_begin == nullptr: single_new rows, single_cached before).
struct SeqLayout {
  const int32_t* q_begin = nullptr;
  const int32_t* num_new = nullptr;
  const int32_t* num_cached = nullptr;
  const int32_t* token_seq = nullptr;      // per query row < num_rows: its sequence (-1: none)
  int32_t num_rows = 0;
  const int32_t* block_tables = nullptr;   // [num_seqs, max_blocks], null: dense rows
  int32_t max_blocks = 0, block_size = 1;
  int32_t single_new = 0, single_cached = 0;
  // Tiles of kQueryTile query rows that never straddle two sequences: pairs
  // (sequence, first row within it); null in dense mode (tile i = rows 64i..).
  const int32_t* q_tiles = nullptr;
  int32_t num_q_tiles = 0;
};

constexpr int kQueryTile = 64;

// q: F32 [tokens, q_heads, k.dim]; out: F32 [tokens, q_heads, v.dim].
struct AttentionArgs {
  const float* q = nullptr;
  float* out = nullptr;
  KvView k, v;
  SeqLayout seqs;
  int32_t tokens = 0, q_heads = 0;
  int32_t max_context = 0;  // longest num_cached + num_new of the step
  float scale = 1.0f;
};

// ---- KV cache ----
// Writes rows [tokens, heads * dim] of F32 src into the cache rows slots[t]
// (BF16: round to nearest even; FP8: per row s = amax / 448 (1 if amax is 0),
// scale[slot] = s, value = e4m3(x / s) saturating; F32: copy).
void launch_store_kv(const float* src, int64_t tokens, const int64_t* slots, const KvView& dst, cudaStream_t stream);

// out F32 [num_tokens, heads, dim] = rows of view k for tokens 0..num_tokens-1
// of the sequence with the given block table (device), dequantized.
void launch_gather_kv(const KvView& k, const int32_t* block_table, int32_t block_size, int64_t num_tokens,
                      float* out, cudaStream_t stream);

// ---- attention ----
// Any k.dim, v.dim <= kGenericMaxVDim: F32 dot products on CUDA cores, one
// block per (query row, KV head, group of up to 8 q heads), keys in tiles with
// an online softmax. num_splits > 1 splits each row's keys into that many
// ranges (flash-decoding) written to `workspace` and combined by a second
// kernel; workspace must hold generic_workspace_floats(...) floats.
constexpr int kGenericMaxVDim = 512;
int64_t generic_workspace_floats(const AttentionArgs& a, int num_splits);
void launch_generic_attention(const AttentionArgs& a, int num_splits, float* workspace, cudaStream_t stream);
// Merges the num_splits partial (o, m, l) a split launch left in `workspace`
// (the layout of generic_workspace_floats) into a.out.
void launch_attention_combine(const AttentionArgs& a, int num_splits, const float* workspace, cudaStream_t stream);

// Decode-shaped attention on BF16 or FP8 K/V caches with head dim 64 or 128
// (gqa_decode.cu): lanes over 8-dim row slices, the q-head group sharing each
// row; same split workspace as the CUDA-core kernel.
bool gqa_decode_supports(const AttentionArgs& a);
void launch_gqa_decode(const AttentionArgs& a, int num_splits, float* workspace, cudaStream_t stream);

// Tensor cores (mma.sync m16n8k16 BF16, F32 accumulation): Q, K, V and the
// softmax weights P rounded to BF16 on their way into the tensor cores. A
// block takes 1-3 consecutive 64-row query tiles of one q head (3 up to
// 128-wide heads, 2 for MLA's 192/128) that share each 64-key K/V tile
// (three cp.async stages; docs/cuda-attention.md). Shapes it takes: tensor_core_attention_supports(k.dim, v.dim);
// head dims must be multiples of 8 elements apart (16-byte row chunks).
bool tensor_core_attention_supports(int k_dim, int v_dim);
void launch_tensor_core_attention(const AttentionArgs& a, cudaStream_t stream);
// out[i] = bf16(x[i]) (round to nearest even): dense F32 K/V become BF16 once
// before the tensor-core kernel reads them many times.
void launch_f32_to_bf16_rows(const float* x, int64_t n, uint16_t* out, cudaStream_t stream);

}  // namespace mx::cuda
