// CudaAttention: the KV cache and attention ops on the GPU (contract in
// cuda_attention.h, kernels in src/cuda/attention/). Host work here is
// validation (the kernels index the cache with what they are given, so every
// slot and block id is range-checked on the host first), the one-copy upload
// of a step's metadata, and the choice of kernel.
#include "cuda/backend/cuda_attention.h"

#include <algorithm>
#include <cstring>

#include "core/error.h"
#include "cuda/attention/attention_kernels.h"
#include "cuda/attention/mla_decode.h"
#include "cuda/backend/device_memory.h"
#include "cuda/backend/step_graphs.h"

namespace mx::cuda {

// One device buffer: [slots i64][q_begin][num_new][num_cached][token_seq]
// [q_tiles (seq, first row) pairs][block tables, max_blocks per seq] (i32).
struct DeviceAttentionMeta {
  Tensor buffer;
  const AttentionMeta* host = nullptr;
  const int64_t* host_slots = nullptr;
  size_t num_slots = 0;
  size_t num_seqs = 0;
  const int64_t* slots = nullptr;
  SeqLayout layout;
  std::vector<const int32_t*> host_tables;  // per seq: its host block table
  std::vector<size_t> host_table_sizes;
  int32_t max_context = 0, max_new = 0, rows_covered = 0, max_block_id = -1;
  // Decode-only with sequence i at row i (MLA's absorbed batch): the layout
  // mla_decode takes, with context_lens = num_cached + 1.
  bool decode_batch = false;
  const int32_t* context_lens = nullptr;
};

namespace {

KvType kv_type(DType d, const char* op) {
  switch (d) {
    case DType::F32: return KvType::F32;
    case DType::BF16: return KvType::BF16;
    case DType::F8E4M3: return KvType::FP8;
    default: fail("CudaAttention::{}: KV dtype {} is not supported (F32, BF16, F8E4M3)", op, dtype_name(d));
  }
}

void require_device(const Tensor& t, const char* op, const char* name) {
  MX_CHECK(on_device(t), "CudaAttention::{}: {} {} is not a device tensor", op, name,
           t.defined() ? t.describe() : std::string("(undefined)"));
}

// The key (or value) tensor of a cache as the kernels read it.
KvView cache_view(const KvLayerCache& c, bool values) {
  KvView v;
  const char* op = "paged_attention";
  if (values && c.v.defined()) {
    v.data = c.v.raw(), v.type = kv_type(c.v.dtype(), op), v.heads = int32_t(c.v.dim(2));
    v.dim = int32_t(c.v.dim(3)), v.head_stride = v.dim, v.row_stride = int64_t(v.heads) * v.dim;
    v.scale = c.v_scale.defined() ? c.v_scale.data<float>() : nullptr;
    return v;
  }
  v.data = c.k.raw(), v.type = kv_type(c.k.dtype(), op), v.heads = int32_t(c.heads());
  v.head_stride = int32_t(c.k_dim()), v.row_stride = int64_t(c.heads()) * c.k_dim();
  v.dim = values ? int32_t(c.v_dim) : int32_t(c.k_dim());  // latent values: the first v_dim of each key row
  v.scale = c.k_scale.defined() ? c.k_scale.data<float>() : nullptr;
  return v;
}

KvView dense_view(const Tensor& t) {
  KvView v;
  v.data = t.raw(), v.type = KvType::F32, v.heads = int32_t(t.dim(1)), v.dim = int32_t(t.dim(2));
  v.head_stride = v.dim, v.row_stride = int64_t(v.heads) * v.dim;
  return v;
}

std::unique_ptr<DeviceAttentionMeta> upload_meta(const AttentionMeta& meta, StepGraphs& graphs, const char* op) {
  auto d = std::make_unique<DeviceAttentionMeta>();
  const int64_t bs = meta.block_size;
  MX_CHECK(bs > 0, "AttentionMeta: block_size {} must be positive", bs);
  const size_t n = meta.seqs.size();
  // A static step's tables have a fixed width (and its kernels plan for the
  // longest context that width holds), so a recording replays for any
  // contexts up to it.
  MX_CHECK(meta.table_width >= 0, "AttentionMeta: table width {}", meta.table_width);
  size_t max_blocks = std::max<size_t>(1, size_t(meta.table_width));
  int32_t rows = 0;
  for (const AttentionSeq& s : meta.seqs) {
    MX_CHECK(s.q_begin >= 0 && s.num_new >= 0 && s.num_cached >= 0, "AttentionMeta: sequence q_begin {} num_new {} "
             "num_cached {}", s.q_begin, s.num_new, s.num_cached);
    const int64_t ctx = s.num_cached + s.num_new;
    MX_CHECK(ctx < (int64_t(1) << 30), "AttentionMeta: context {} too long", ctx);
    const size_t needed = size_t((ctx + bs - 1) / bs);
    MX_CHECK(needed <= s.block_table.size(), "AttentionMeta: {} tokens need {} blocks of {} but the block table has {}",
             ctx, needed, bs, s.block_table.size());
    max_blocks = std::max(max_blocks, needed);
    if (s.num_new > 0) rows = std::max(rows, int32_t(s.q_begin + s.num_new));
    d->max_context = std::max(d->max_context, int32_t(ctx));
    d->max_new = std::max(d->max_new, int32_t(s.num_new));
    for (size_t b = 0; b < needed; ++b) {
      MX_CHECK(s.block_table[b] >= 0, "AttentionMeta: negative block id {}", s.block_table[b]);
      d->max_block_id = std::max(d->max_block_id, s.block_table[b]);
    }
  }
  std::vector<int32_t> token_seq(size_t(rows), -1), tiles;
  for (size_t i = 0; i < n; ++i) {
    const AttentionSeq& s = meta.seqs[i];
    for (int64_t r = 0; r < s.num_new; ++r) {
      int32_t& owner = token_seq[size_t(s.q_begin + r)];
      MX_CHECK(owner < 0, "AttentionMeta: row {} belongs to sequences {} and {}", s.q_begin + r, owner, i);
      owner = int32_t(i);
      ++d->rows_covered;
    }
    for (int64_t r = 0; r < s.num_new; r += kQueryTile) tiles.insert(tiles.end(), {int32_t(i), int32_t(r)});
  }
  const size_t slot_bytes = meta.slots.size() * sizeof(int64_t);
  const size_t ints = 4 * n + token_seq.size() + tiles.size() + n * max_blocks;
  std::vector<uint8_t> host(slot_bytes + ints * sizeof(int32_t));
  if (slot_bytes) std::memcpy(host.data(), meta.slots.data(), slot_bytes);
  int32_t* p = reinterpret_cast<int32_t*>(host.data() + slot_bytes);
  int32_t* q_begin = p;
  int32_t* num_new = q_begin + n;
  int32_t* num_cached = num_new + n;
  int32_t* seq_of = num_cached + n;
  int32_t* q_tiles = seq_of + token_seq.size();
  int32_t* tables = q_tiles + tiles.size();
  int32_t* context_lens = tables + n * max_blocks;
  d->decode_batch = n > 0;
  for (size_t i = 0; i < n; ++i) {
    const AttentionSeq& s = meta.seqs[i];
    q_begin[i] = int32_t(s.q_begin), num_new[i] = int32_t(s.num_new), num_cached[i] = int32_t(s.num_cached);
    context_lens[i] = int32_t(s.num_cached + s.num_new);
    d->decode_batch = d->decode_batch && s.num_new == 1 && s.q_begin == int64_t(i);
    const size_t used = std::min(s.block_table.size(), max_blocks);
    std::copy(s.block_table.begin(), s.block_table.begin() + ptrdiff_t(used), tables + i * max_blocks);
    std::fill(tables + i * max_blocks + used, tables + (i + 1) * max_blocks, 0);
    d->host_tables.push_back(s.block_table.data());
    d->host_table_sizes.push_back(s.block_table.size());
  }
  std::copy(token_seq.begin(), token_seq.end(), seq_of);
  std::copy(tiles.begin(), tiles.end(), q_tiles);
  if (meta.table_width > 0) d->max_context = std::max(d->max_context, int32_t(max_blocks * size_t(bs)));

  const uint8_t* base = graphs.upload(host.data(), host.size(), d->buffer, op);
  const ptrdiff_t ints_at = ptrdiff_t(slot_bytes);
  auto dev = [&](const int32_t* host_ptr) {
    return reinterpret_cast<const int32_t*>(base + ints_at + (reinterpret_cast<const uint8_t*>(host_ptr) -
                                                              reinterpret_cast<const uint8_t*>(p)));
  };
  d->host = &meta;
  d->host_slots = meta.slots.data(), d->num_slots = meta.slots.size(), d->num_seqs = n;
  d->slots = reinterpret_cast<const int64_t*>(base);
  SeqLayout& l = d->layout;
  l.q_begin = dev(q_begin), l.num_new = dev(num_new), l.num_cached = dev(num_cached);
  l.token_seq = dev(seq_of), l.num_rows = rows;
  l.q_tiles = dev(q_tiles), l.num_q_tiles = int32_t(tiles.size() / 2);
  l.block_tables = dev(tables), l.max_blocks = int32_t(max_blocks), l.block_size = int32_t(bs);
  d->context_lens = dev(context_lens);
  return d;
}

}  // namespace

AttentionKernel parse_attention_kernel(const std::string& name) {
  if (name == "auto") return AttentionKernel::Auto;
  if (name == "generic") return AttentionKernel::Generic;
  if (name == "tensor-core") return AttentionKernel::TensorCore;
  if (name == "mla-decode") return AttentionKernel::MlaDecode;
  fail_input("unknown attention kernel '{}' (auto, generic, tensor-core, mla-decode)", name);
}

CudaAttention::CudaAttention(cudaStream_t stream, bool poison_outputs) : stream_(stream), poison_(poison_outputs) {
  int device = 0;
  check_cuda(cudaGetDevice(&device), "CudaAttention", "cudaGetDevice");
  check_cuda(cudaDeviceGetAttribute(&num_sms_, cudaDevAttrMultiProcessorCount, device), "CudaAttention",
             "cudaDeviceGetAttribute(MultiProcessorCount)");
}

CudaAttention::~CudaAttention() = default;

void CudaAttention::begin_step() {
  prepared_.clear();
  adhoc_.reset();
}

void CudaAttention::prepare(const AttentionMeta& meta) { prepared_[&meta] = upload_meta(meta, *graphs_, "prepare"); }

const DeviceAttentionMeta& CudaAttention::device_meta(const AttentionMeta& meta) {
  auto it = prepared_.find(&meta);
  // The address alone could be a new meta at a freed one's place: the slots
  // buffer and the sequence count must match too.
  if (it != prepared_.end() && it->second->host_slots == meta.slots.data() &&
      it->second->num_slots == meta.slots.size() && it->second->num_seqs == meta.seqs.size())
    return *it->second;
  adhoc_ = upload_meta(meta, *graphs_, "paged_attention");
  return *adhoc_;
}

const DeviceAttentionMeta* CudaAttention::find_prepared_slots(const std::vector<int64_t>& slots) const {
  for (const auto& [host, d] : prepared_)
    if (d->host_slots == slots.data() && d->num_slots == slots.size() && !slots.empty()) return d.get();
  return nullptr;
}

const int32_t* CudaAttention::find_prepared_block_table(const std::vector<int32_t>& block_table) const {
  for (const auto& [host, d] : prepared_)
    for (size_t i = 0; i < d->num_seqs; ++i)
      if (d->host_tables[i] == block_table.data() && d->host_table_sizes[i] == block_table.size() &&
          !block_table.empty())
        return d->layout.block_tables + int64_t(i) * d->layout.max_blocks;
  return nullptr;
}

void CudaAttention::check_launch(const char* op) { check_cuda(cudaGetLastError(), op, "kernel launch"); }

KvLayerCache CudaAttention::allocate_kv(int64_t num_blocks, int64_t block_size, int64_t heads, int64_t k_dim,
                                        int64_t v_dim, bool latent, DType dtype) {
  kv_type(dtype, "allocate_kv");
  MX_CHECK(num_blocks > 0 && block_size > 0 && heads > 0 && k_dim > 0 && v_dim > 0 && (!latent || v_dim <= k_dim),
           "CudaAttention::allocate_kv: {} blocks of {}, {} heads, k_dim {}, v_dim {}{}", num_blocks, block_size, heads,
           k_dim, v_dim, latent ? " (latent)" : "");
  KvLayerCache c;
  c.v_dim = v_dim;
  c.k = device_persistent(dtype, {num_blocks, block_size, heads, k_dim}, "allocate_kv");
  if (!latent) c.v = device_persistent(dtype, {num_blocks, block_size, heads, v_dim}, "allocate_kv");
  if (dtype == DType::F8E4M3) {
    c.k_scale = device_persistent(DType::F32, {num_blocks, block_size}, "allocate_kv");
    if (!latent) c.v_scale = device_persistent(DType::F32, {num_blocks, block_size}, "allocate_kv");
  }
  return c;
}

void CudaAttention::store_kv(KvLayerCache& cache, const Tensor& k, const Tensor& v, const std::vector<int64_t>& slots) {
  const char* op = "store_kv";
  require_device(k, op, "k");
  require_device(cache.k, op, "cache k");
  const int64_t tokens = k.ndim() > 0 ? k.dim(0) : 0, k_row = cache.heads() * cache.k_dim();
  MX_CHECK(k.dtype() == DType::F32 && int64_t(slots.size()) == tokens && k.numel() == tokens * k_row,
           "CudaAttention::store_kv: {} slots, k {}, cache {}", slots.size(), k.describe(), cache.k.describe());
  const int64_t capacity = cache.k.dim(0) * cache.block_size();
  for (int64_t s : slots)
    MX_CHECK(s >= 0 && s < capacity, "CudaAttention::store_kv: slot {} outside the cache of {} tokens", s, capacity);
  if (tokens == 0) return;
  const int64_t* d_slots = nullptr;
  Tensor uploaded;
  if (const DeviceAttentionMeta* d = find_prepared_slots(slots)) {
    d_slots = d->slots;
  } else {
    d_slots = reinterpret_cast<const int64_t*>(graphs_->upload(slots.data(), size_t(tokens) * 8, uploaded, op));
  }
  KvView kv = cache_view(cache, false);
  launch_store_kv(k.data<float>(), tokens, d_slots, kv, stream_);
  check_launch(op);
  if (cache.v.defined()) {
    require_device(v, op, "v");
    MX_CHECK(v.dtype() == DType::F32 && v.numel() == tokens * cache.heads() * cache.v_dim,
             "CudaAttention::store_kv: v {} for cache {}", v.describe(), cache.v.describe());
    launch_store_kv(v.data<float>(), tokens, d_slots, cache_view(cache, true), stream_);
    check_launch(op);
  }
}

Tensor CudaAttention::gather_cached_k(const KvLayerCache& cache, const std::vector<int32_t>& block_table,
                                     int64_t num_tokens) {
  const char* op = "gather_cached_k";
  require_device(cache.k, op, "cache k");
  const int64_t bs = cache.block_size(), blocks = (num_tokens + bs - 1) / bs;
  MX_CHECK(num_tokens >= 0 && size_t(blocks) <= block_table.size(),
           "CudaAttention::gather_cached_k: {} tokens need {} blocks but the block table has {}", num_tokens, blocks,
           block_table.size());
  for (int64_t b = 0; b < blocks; ++b)
    MX_CHECK(block_table[size_t(b)] >= 0 && block_table[size_t(b)] < cache.k.dim(0),
             "CudaAttention::gather_cached_k: block {} outside the {} cache blocks", block_table[size_t(b)],
             cache.k.dim(0));
  Tensor out = device_empty(DType::F32, {num_tokens, cache.heads(), cache.k_dim()}, stream_, poison_);
  if (num_tokens == 0) return out;
  const int32_t* d_table = find_prepared_block_table(block_table);
  Tensor uploaded;
  if (!d_table) {
    d_table = reinterpret_cast<const int32_t*>(graphs_->upload(block_table.data(), size_t(blocks) * 4, uploaded, op));
  }
  launch_gather_kv(cache_view(cache, false), d_table, int32_t(bs), num_tokens, out.data<float>(), stream_);
  check_launch(op);
  return out;
}

bool CudaAttention::use_tensor_cores(const AttentionArgs& args, bool decode_only) const {
  return tensor_core_attention_supports(args.k.dim, args.v.dim) &&
         (kernel_ == AttentionKernel::TensorCore || (kernel_ == AttentionKernel::Auto && !decode_only));
}

void CudaAttention::run(const AttentionArgs& args, bool decode_only, const char* op) {
  if (use_tensor_cores(args, decode_only)) {
    launch_tensor_core_attention(args, stream_);
    check_launch(op);
    return;
  }
  MX_CHECK(args.v.dim <= kGenericMaxVDim, "CudaAttention::{}: value dim {} above the {} the kernels take", op,
           args.v.dim, kGenericMaxVDim);
  // The kernel waits on cache reads: few rows and long contexts leave too few
  // warps in flight. Split the keys until about kBlocksPerSm blocks per SM
  // run, each split at least 256 keys long.
  constexpr int64_t kBlocksPerSm = 8;
  const int64_t group = args.q_heads / args.k.heads, blocks = int64_t(args.tokens) * args.k.heads * ((group + 7) / 8);
  const int64_t target = kBlocksPerSm * num_sms_;
  int splits = 1;
  if (blocks < target)
    splits = int(std::clamp<int64_t>(std::min<int64_t>((target + blocks - 1) / blocks, args.max_context / 256), 1, 64));
  Tensor workspace;
  if (splits > 1) workspace = device_empty(DType::F32, {generic_workspace_floats(args, splits)}, stream_);
  float* ws = splits > 1 ? workspace.data<float>() : nullptr;
  // BF16/FP8 caches with head dims 64/128: the row-slice decode kernel
  // (docs/cuda-attention.md); --attention-kernel generic keeps the CUDA-core one.
  if (kernel_ == AttentionKernel::Auto && gqa_decode_supports(args)) launch_gqa_decode(args, splits, ws, stream_);
  else launch_generic_attention(args, splits, ws, stream_);
  check_launch(op);
}

bool CudaAttention::use_mla_decode(const KvLayerCache& cache, const DeviceAttentionMeta& d) const {
  const bool shape = !cache.v.defined() && cache.heads() == 1 && cache.k_dim() == kMlaHeadDim &&
                     cache.v_dim == kMlaValueDim && cache.k.dtype() != DType::F32 && d.decode_batch;
  return shape && (kernel_ == AttentionKernel::Auto || kernel_ == AttentionKernel::MlaDecode);
}

void CudaAttention::run_mla_decode(const AttentionArgs& a, const KvLayerCache& cache, const DeviceAttentionMeta& d) {
  MlaDecodeArgs m;
  m.shape.batch = int(d.num_seqs), m.shape.heads = a.q_heads, m.shape.max_blocks = d.layout.max_blocks;
  m.shape.block_size = d.layout.block_size;
  m.shape.kv_dtype = cache.k.dtype() == DType::F8E4M3 ? MlaKvDtype::kFP8E4M3 : MlaKvDtype::kBF16;
  m.q = a.q, m.k_cache = cache.k.raw(), m.k_scale = a.k.scale;
  m.block_tables = d.layout.block_tables, m.context_lens = d.context_lens;
  m.softmax_scale = a.scale, m.out = a.out;
  Tensor workspace;
  if (const size_t bytes = mla_decode_workspace_bytes(m.shape, 0, num_sms_)) {
    workspace = device_empty(DType::U8, {int64_t(bytes)}, stream_);
    m.workspace = workspace.raw();
  }
  check_cuda(mla_decode(m, num_sms_, stream_), "paged_attention", "mla_decode");
}

Tensor CudaAttention::paged_attention(const Tensor& q, const KvLayerCache& cache, const AttentionMeta& meta,
                                     float scale) {
  const char* op = "paged_attention";
  require_device(q, op, "q");
  require_device(cache.k, op, "cache k");
  MX_CHECK(q.dtype() == DType::F32 && q.ndim() == 3 && q.dim(2) == cache.k_dim() && q.dim(1) % cache.heads() == 0,
           "CudaAttention::paged_attention: q {} for cache {}", q.describe(), cache.k.describe());
  MX_CHECK(meta.block_size == cache.block_size(), "CudaAttention::paged_attention: meta block size {} vs cache {}",
           meta.block_size, cache.block_size());
  const int64_t tokens = q.dim(0), q_heads = q.dim(1), dv = cache.v_dim;
  const DeviceAttentionMeta& d = device_meta(meta);
  MX_CHECK(d.layout.num_rows <= tokens, "CudaAttention::paged_attention: sequences cover rows up to {} of q's {}",
           d.layout.num_rows, tokens);
  MX_CHECK(d.max_block_id < cache.k.dim(0), "CudaAttention::paged_attention: block {} outside the {} cache blocks",
           d.max_block_id, cache.k.dim(0));
  Tensor out = device_empty(DType::F32, {tokens, q_heads, dv}, stream_, poison_);
  if (d.rows_covered < tokens)  // rows of no sequence are zero, as in the CPU backend
    check_cuda(cudaMemsetAsync(out.raw(), 0, out.nbytes(), stream_), op, "cudaMemsetAsync");
  if (d.rows_covered == 0) return out;
  AttentionArgs a;
  a.q = q.data<float>(), a.out = out.data<float>();
  a.k = cache_view(cache, false), a.v = cache_view(cache, true);
  a.seqs = d.layout;
  a.tokens = int32_t(tokens), a.q_heads = int32_t(q_heads), a.max_context = d.max_context, a.scale = scale;
  if (use_mla_decode(cache, d)) {
    run_mla_decode(a, cache, d);
  } else {
    run(a, d.max_new <= 1, op);
  }
  return out;
}

Tensor CudaAttention::attention(const Tensor& q, const Tensor& k, const Tensor& v, float scale) {
  const char* op = "attention";
  require_device(q, op, "q");
  require_device(k, op, "k");
  require_device(v, op, "v");
  MX_CHECK(q.ndim() == 3 && k.ndim() == 3 && v.ndim() == 3 && q.dtype() == DType::F32 && k.dtype() == DType::F32 &&
               v.dtype() == DType::F32,
           "CudaAttention::attention: q {}, k {}, v {} (F32 [tokens, heads, dim])", q.describe(), k.describe(),
           v.describe());
  const int64_t tq = q.dim(0), heads = q.dim(1), dk = q.dim(2), tk = k.dim(0), kv_heads = k.dim(1), dv = v.dim(2);
  MX_CHECK(k.dim(2) == dk && v.dim(0) == tk && v.dim(1) == kv_heads && kv_heads > 0 && heads % kv_heads == 0 &&
               tk >= tq,
           "CudaAttention::attention: q {}, k {}, v {}", q.describe(), k.describe(), v.describe());
  Tensor out = device_empty(DType::F32, {tq, heads, dv}, stream_, poison_);
  if (tq == 0) return out;
  AttentionArgs a;
  a.q = q.data<float>(), a.out = out.data<float>();
  a.k = dense_view(k), a.v = dense_view(v);
  a.seqs.single_new = int32_t(tq), a.seqs.single_cached = int32_t(tk - tq);
  a.tokens = int32_t(tq), a.q_heads = int32_t(heads), a.max_context = int32_t(tk), a.scale = scale;
  Tensor k_bf16, v_bf16;
  if (use_tensor_cores(a, tq == 1)) {
    // The kernel reads every K/V row once per 64 query rows: halve those bytes
    // and take the cp.async path (the values are rounded to BF16 either way).
    k_bf16 = device_empty(DType::BF16, k.shape(), stream_);
    v_bf16 = device_empty(DType::BF16, v.shape(), stream_);
    launch_f32_to_bf16_rows(k.data<float>(), k.numel(), k_bf16.data<uint16_t>(), stream_);
    launch_f32_to_bf16_rows(v.data<float>(), v.numel(), v_bf16.data<uint16_t>(), stream_);
    check_launch(op);
    a.k.data = k_bf16.raw(), a.k.type = KvType::BF16;
    a.v.data = v_bf16.raw(), a.v.type = KvType::BF16;
  }
  run(a, tq == 1, op);
  return out;
}

}  // namespace mx::cuda
