// The op set the models are written against. A model (src/model/) only calls
// these; a backend (CPU reference here, CUDA later) implements them. Activations
// are F32 tensors [tokens, features] (CPU backend); weights keep the format the
// checkpoint stores (LinearWeight) and each op dispatches on it.
#pragma once
#include <cstdint>
#include <memory>
#include <vector>

#include "core/tensor.h"
#include "io/model_config.h"
#include "ops/op_clock.h"
#include "quant/linear_weight.h"

namespace mx {

// Rotary embedding for one model: the inverse frequencies (after YaRN / llama3 /
// linear scaling) of rotary_dim/2 pairs, a factor applied to cos and sin, and
// the pairing style.
struct RopeTable {
  enum class Style { Neox, Interleaved };  // Neox: (x[i], x[i+d/2]); Interleaved (GPT-J): (x[2i], x[2i+1])
  Style style = Style::Neox;
  int64_t rotary_dim = 0;
  std::vector<float> inv_freq;  // rotary_dim / 2 entries
  float attention_factor = 1.0f;  // YaRN: cos and sin are multiplied by this
};

// Routing parameters of a MoE layer (DeepSeek-V3 noaux_tc or softmax top-k).
struct RoutingParams {
  int64_t top_k = 0;
  int64_t n_group = 1, topk_group = 1;
  bool normalize = true;          // norm_topk_prob
  float routed_scaling_factor = 1.0f;
};

// Per token: the chosen experts and their combine weights, resident where the
// backend computes (host for the CPU backend, GPU memory for CUDA), so routing
// never forces a device-to-host copy.
struct MoeRouting {
  int64_t top_k = 0;
  Tensor expert_ids;  // I32 [tokens, top_k]
  Tensor weights;     // F32 [tokens, top_k], routed_scaling_factor applied
};

struct ExpertWeights {
  LinearWeight gate, up, down;  // SwiGLU: down(silu(gate x) * up x)
};

// Paged KV storage of one layer. k: [num_blocks, block_size, heads, k_dim];
// v the same with v_dim, or undefined for a latent cache (MLA), whose values
// are the first v_dim entries of k. BF16 or F8E4M3 (then one F32 scale per
// token and tensor, k_scale/v_scale [num_blocks, block_size]) or F32.
struct KvLayerCache {
  Tensor k, v;
  Tensor k_scale, v_scale;
  int64_t v_dim = 0;
  int64_t block_size() const { return k.dim(1); }
  int64_t heads() const { return k.dim(2); }
  int64_t k_dim() const { return k.dim(3); }
};

// One sequence's slice of a step, in the attention's terms.
struct AttentionSeq {
  int64_t q_begin = 0;     // first row of this sequence in the step's token rows
  int64_t num_new = 0;     // new tokens (rows) of this step
  int64_t num_cached = 0;  // tokens before them already in the cache
  std::vector<int32_t> block_table;
};

struct AttentionMeta {
  int64_t block_size = 0;
  std::vector<AttentionSeq> seqs;
  std::vector<int64_t> slots;  // per new token: block * block_size + offset
  // > 0 in a static step (step graphs): the device block tables are this many
  // entries wide and kernels plan for contexts up to table_width * block_size
  // (0: the longest table the step needs).
  int64_t table_width = 0;
};

class Ops {
 public:
  virtual ~Ops() = default;

  // ---- memory and step lifetime ----
  // An uninitialized-or-zero tensor resident on this backend's device (CPU:
  // zero-filled host memory).
  virtual Tensor empty(DType dtype, Shape shape) = 0;
  // The same values in host memory (CPU backend: the tensor itself). Waits for
  // the work that produces t.
  virtual Tensor to_host(const Tensor& t) = 0;
  // A step starts: per-step state of the previous step (uploaded metadata) is
  // dropped. prepare() announces host metadata the step's ops will be called
  // with many times (every layer), so a device backend can copy it once and
  // recognize it by address until the next begin_step(). Both are hints: an op
  // called with metadata that was never prepared must still be correct.
  virtual void begin_step() {}
  // Index vectors: positions, token ids (int32), row lists (int64).
  virtual void prepare(const std::vector<int32_t>& values) { (void)values; }
  virtual void prepare(const std::vector<int64_t>& values) { (void)values; }
  virtual void prepare(const AttentionMeta& meta) { (void)meta; }

  // ---- step graphs (CUDA graphs; docs/cuda-graphs.md) ----
  // A backend that supports them can record the ops of a step once and
  // replay the recording for later steps of the same shapes. The model drives
  // it (model/step_graphs.h): begin_static_step(key) instead of begin_step(),
  // for a key that names the step's shape, the same prepare() calls in the
  // same order (a static step of a key puts their data at the same device
  // addresses every time), then either replay_step() or begin_capture() / the
  // ops / end_capture(). During a capture no op may need host data that was
  // not prepared (the backend throws, the model calls abort_capture() and
  // runs the step eagerly).
  virtual bool supports_step_graphs() const { return false; }
  // The device stream this backend's ops run on (cudaStream_t on CUDA), or
  // null for a host backend; a communicator enqueues its collectives there
  // (Communicator::set_device_stream).
  virtual void* device_stream() { return nullptr; }
  virtual void begin_static_step(uint64_t key) {
    (void)key;
    begin_step();
  }
  // Replays the recording of this static step's key (its output: out); false
  // when there is none, this step's prepares do not match the recorded ones,
  // or the launch failed (run the step eagerly then).
  virtual bool replay_step(Tensor& out) {
    (void)out;
    return false;
  }
  // out_dtype/out_shape: the recorded step's result, kept in a buffer of the
  // recording that end_capture() returns (valid until the next step). False:
  // this step cannot be recorded (its uploads did not all reach fixed
  // addresses); run it eagerly.
  virtual bool begin_capture(DType out_dtype, Shape out_shape) {
    (void)out_dtype, (void)out_shape;
    return false;
  }
  virtual Tensor end_capture(Tensor out) { return out; }
  virtual void abort_capture() {}

  // ---- profiling (--profile-ops, ops/profiling_ops.h) ----
  // A clock on which this backend's work can be timed (op_clock.h); the host
  // clock is right for backends that finish each op before returning.
  virtual std::unique_ptr<OpClock> make_clock() { return std::make_unique<HostOpClock>(); }
  // Marks work that is not an op but runs between ops (the all-reduces of a
  // sharded model), so a profile can name it; no-ops unless profiling.
  virtual void begin_region(const char* name) { (void)name; }
  virtual void end_region() {}

  // ---- elementwise and norms ----
  // table: [vocab, hidden] (BF16/F32) -> F32 [ids, hidden].
  virtual Tensor embedding(const Tensor& table, const std::vector<int32_t>& ids) = 0;
  virtual Tensor rms_norm(const Tensor& x, const Tensor& weight, float eps) = 0;
  // residual += delta, then returns rms_norm(residual) (the fused pre-norm step).
  virtual Tensor add_rms_norm(Tensor& residual, const Tensor& delta, const Tensor& weight, float eps) = 0;
  virtual void add_inplace(Tensor& x, const Tensor& delta) = 0;
  // x += scale * delta
  virtual void axpy_inplace(Tensor& x, const Tensor& delta, float scale) = 0;
  // Rotates dims [offset, offset + rotary_dim) of each of the `heads` heads of
  // x: [tokens, heads * head_stride] (any trailing layout with that stride).
  virtual void rope_inplace(Tensor& x, const std::vector<int32_t>& positions, const RopeTable& rope,
                            int64_t heads, int64_t head_stride, int64_t offset) = 0;
  // silu(gate) * up, both [tokens, n].
  virtual Tensor silu_and_mul(const Tensor& gate, const Tensor& up) = 0;
  // Columns [begin, end) of x: [tokens, d] viewed as [tokens, groups, d/groups]
  // per group, i.e. out [tokens, groups * (end - begin)].
  virtual Tensor slice_cols(const Tensor& x, int64_t groups, int64_t begin, int64_t end) = 0;
  // Rows selected by index: out[i] = x[rows[i]].
  virtual Tensor gather_rows(const Tensor& x, const std::vector<int64_t>& rows) = 0;
  // dst[rows[i]] = src[i].
  virtual void scatter_rows(Tensor& dst, const std::vector<int64_t>& rows, const Tensor& src) = 0;
  // Per group g: out[t, g] = [a[t, g, :], b[t, g, :]], where a is [tokens,
  // groups * da] and b is [tokens, groups * db], or with shared_b [tokens, db]
  // used by every group (MLA's single k_pe). Returns [tokens, groups, da + db].
  virtual Tensor concat_cols(const Tensor& a, const Tensor& b, int64_t groups, bool shared_b) = 0;

  // ---- matmuls ----
  // y = x W^T (+ bias). MXFP4 weights with quantize_input get their input
  // quantize-dequantized per 32 in W4A4 mode (quant/mxfp4.h's reference
  // mxfp4_qdq_activation_inplace, on the F32 activations).
  virtual Tensor linear(const Tensor& x, const LinearWeight& w) = 0;
  // Per-head matmul: x [tokens, heads, a], w [heads, b, a] -> [tokens, heads, b]
  // (transpose_w = false), or w [heads, a, b] -> [tokens, heads, b] (true).
  virtual Tensor head_matmul(const Tensor& x, const Tensor& w, bool transpose_w) = 0;

  // ---- MoE ----
  // Both routers return tensors on this backend's device.
  virtual MoeRouting route_noaux_tc(const Tensor& router_logits, const Tensor& correction_bias,
                                    const RoutingParams& p) = 0;
  virtual MoeRouting route_softmax(const Tensor& router_logits, const RoutingParams& p) = 0;
  // Sum over the chosen experts of weight * down(silu(gate x) * up x).
  virtual Tensor fused_moe(const Tensor& x, const std::vector<ExpertWeights>& experts, const MoeRouting& r) = 0;

  // ---- attention over the paged cache ----
  virtual KvLayerCache allocate_kv(int64_t num_blocks, int64_t block_size, int64_t heads, int64_t k_dim,
                                   int64_t v_dim, bool latent, DType dtype) = 0;
  // Writes k [tokens, heads, k_dim] (and v) into their slots.
  virtual void store_kv(KvLayerCache& cache, const Tensor& k, const Tensor& v, const std::vector<int64_t>& slots) = 0;
  // q [tokens, q_heads, k_dim] against each sequence's cached + new tokens
  // (causal), GQA over cache.heads(); returns [tokens, q_heads, v_dim].
  virtual Tensor paged_attention(const Tensor& q, const KvLayerCache& cache, const AttentionMeta& meta,
                                 float scale) = 0;
  // The first num_tokens cached K rows of one sequence, F32 [num_tokens, heads, k_dim].
  virtual Tensor gather_cached_k(const KvLayerCache& cache, const std::vector<int32_t>& block_table,
                                 int64_t num_tokens) = 0;
  // Dense attention of one sequence: q [tq, h, dk], k [tk, hk, dk], v [tk, hk, dv];
  // query i sees keys j <= i + (tk - tq). Returns [tq, h, dv].
  virtual Tensor attention(const Tensor& q, const Tensor& k, const Tensor& v, float scale) = 0;
};

// The CPU reference backend (multi-threaded through ThreadPool::global()).
std::unique_ptr<Ops> make_cpu_ops(ActivationMode mode);

// RoPE inverse frequencies for plain / "linear" / "llama3" / "yarn" scaling,
// following transformers' rope initializers.
RopeTable make_rope_table(const RopeScaling& scaling, double theta, int64_t rotary_dim,
                          int64_t max_position_embeddings, RopeTable::Style style);
// YaRN's softmax scale multiplier m = 0.1 * mscale * ln(factor) + 1 (1 when factor <= 1).
double yarn_mscale(double factor, double mscale);

// Dequantizes rows [row_begin, row_end) of any LinearWeight into out (F32,
// (row_end - row_begin) * in_features values). Exact for every format.
void dequantize_rows(const LinearWeight& w, int64_t row_begin, int64_t row_end, float* out);
// The whole weight as F32 [out, in] (used for small weights the model
// re-lays out at load, e.g. MLA's absorbed kv_b_proj).
Tensor dequantize_weight(const LinearWeight& w);

}  // namespace mx
