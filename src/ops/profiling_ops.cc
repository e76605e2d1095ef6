#include "ops/profiling_ops.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>

#include "core/log.h"

namespace mx {
namespace {

// "language_model.model.layers.12.self_attn.q_a_proj" -> "self_attn.q_a_proj":
// the same projection of every layer sums into one row.
std::string linear_row_name(const std::string& weight_name) {
  const size_t at = weight_name.find("layers.");
  if (at == std::string::npos) return "linear " + weight_name;
  size_t i = at + 7;
  while (i < weight_name.size() && std::isdigit(static_cast<unsigned char>(weight_name[i]))) ++i;
  if (i < weight_name.size() && weight_name[i] == '.') ++i;
  return "linear " + weight_name.substr(i);
}

void table(std::string& out, const char* kind, const StepProfile& p) {
  if (p.steps == 0) {
    out += fmt::format("  {} steps: none\n", kind);
    return;
  }
  const double steps = double(p.steps);
  double in_ops = 0;
  for (const auto& [name, e] : p.entries) in_ops += e.ms;
  out += fmt::format("  {} steps: {}, {:.1f} sequences and {:.1f} new tokens per step; span {:.3f} ms per step, "
                     "in ops and regions {:.3f} ms ({:.1f}%), waiting for the host {:.3f} ms\n",
                     kind, p.steps, double(p.sequences) / steps, double(p.tokens) / steps, p.span_ms / steps,
                     in_ops / steps, p.span_ms > 0 ? 100.0 * in_ops / p.span_ms : 0.0,
                     std::max(0.0, p.span_ms - in_ops) / steps);
  std::vector<std::pair<std::string, StepProfile::Entry>> rows(p.entries.begin(), p.entries.end());
  std::sort(rows.begin(), rows.end(), [](const auto& a, const auto& b) { return a.second.ms > b.second.ms; });
  out += fmt::format("    {:<40} {:>10} {:>11} {:>8} {:>10}\n", "op", "calls/step", "ms/step", "% span", "us/call");
  for (const auto& [name, e] : rows)
    out += fmt::format("    {:<40} {:>10.1f} {:>11.4f} {:>7.1f}% {:>10.1f}\n", name, double(e.calls) / steps,
                       e.ms / steps, p.span_ms > 0 ? 100.0 * e.ms / p.span_ms : 0.0,
                       e.calls ? 1000.0 * e.ms / double(e.calls) : 0.0);
}

}  // namespace

int64_t OpProfile::decode_bucket(int64_t n) {
  int64_t b = 1;
  while (b < n) b *= 2;
  return b;
}

ProfilingOps::ProfilingOps(std::unique_ptr<Ops> inner, std::string label)
    : inner_(std::move(inner)), label_(std::move(label)), clock_(inner_->make_clock()) {}

ProfilingOps::~ProfilingOps() {
  try {
    log::info("{}", report());
  } catch (const std::exception& e) {
    log::warn("op profile ({}) unavailable: {}", label_, e.what());
  }
}

template <typename F>
decltype(auto) ProfilingOps::timed(const char* name, F&& fn) {
  const int begin = clock_->record();
  struct Close {  // records the end point also when fn throws
    ProfilingOps& self;
    const char* name;
    int begin;
    ~Close() { self.pending_.push_back({name, begin, self.clock_->record()}); }
  } close{*this, name, begin};
  return fn();
}

void ProfilingOps::flush() {
  if (pending_.empty()) {
    clock_->reset();
    return;
  }
  StepProfile& p =
      step_is_decode_ ? profile_.decode[OpProfile::decode_bucket(step_sequences_)] : profile_.prefill;
  p.steps += 1;
  p.tokens += step_tokens_;
  p.sequences += step_sequences_;
  int first = pending_.front().begin, last = pending_.front().end;
  for (const Timed& t : pending_) {
    first = std::min(first, t.begin);
    last = std::max(last, t.end);
    StepProfile::Entry& e = p.entries[t.name];
    e.calls += 1;
    e.ms += clock_->elapsed_ms(t.begin, t.end);
  }
  p.span_ms += clock_->elapsed_ms(first, last);
  pending_.clear();
  clock_->reset();
}

const OpProfile& ProfilingOps::profile() {
  flush();
  return profile_;
}

std::string ProfilingOps::report() {
  flush();
  std::string out = fmt::format("op profile ({}; device time per step, --profile-ops):\n", label_);
  if (profile_.decode.empty()) table(out, "decode", StepProfile{});
  for (const auto& [bucket, p] : profile_.decode) {
    const int64_t low = bucket / 2 + 1;
    const std::string kind = low == bucket ? fmt::format("decode ({} seqs)", bucket)
                                           : fmt::format("decode ({}-{} seqs)", low, bucket);
    table(out, kind.c_str(), p);
  }
  table(out, "prefill/mixed", profile_.prefill);
  if (!out.empty() && out.back() == '\n') out.pop_back();
  return out;
}

void ProfilingOps::begin_step() {
  flush();
  step_is_decode_ = false;
  step_tokens_ = step_sequences_ = 0;
  inner_->begin_step();
}

void ProfilingOps::prepare(const AttentionMeta& meta) {
  // The first meta of a step is the whole batch (DecoderModel::forward_resident).
  if (step_sequences_ == 0 && !meta.seqs.empty()) {
    step_sequences_ = int64_t(meta.seqs.size());
    step_is_decode_ = true;
    for (const AttentionSeq& s : meta.seqs) {
      step_tokens_ += s.num_new;
      step_is_decode_ = step_is_decode_ && s.num_new == 1;
    }
  }
  inner_->prepare(meta);
}

void ProfilingOps::begin_region(const char* name) {
  open_regions_.push_back({name, clock_->record()});
  inner_->begin_region(name);
}

void ProfilingOps::end_region() {
  inner_->end_region();
  if (open_regions_.empty()) return;
  const auto [name, begin] = open_regions_.back();
  open_regions_.pop_back();
  pending_.push_back({name, begin, clock_->record()});
}

Tensor ProfilingOps::to_host(const Tensor& t) {
  return timed("to_host", [&] { return inner_->to_host(t); });
}
Tensor ProfilingOps::embedding(const Tensor& table, const std::vector<int32_t>& ids) {
  return timed("embedding", [&] { return inner_->embedding(table, ids); });
}
Tensor ProfilingOps::rms_norm(const Tensor& x, const Tensor& weight, float eps) {
  return timed("rms_norm", [&] { return inner_->rms_norm(x, weight, eps); });
}
Tensor ProfilingOps::add_rms_norm(Tensor& residual, const Tensor& delta, const Tensor& weight, float eps) {
  return timed("add_rms_norm", [&] { return inner_->add_rms_norm(residual, delta, weight, eps); });
}
void ProfilingOps::add_inplace(Tensor& x, const Tensor& delta) {
  timed("add_inplace", [&] { inner_->add_inplace(x, delta); });
}
void ProfilingOps::axpy_inplace(Tensor& x, const Tensor& delta, float scale) {
  timed("axpy_inplace", [&] { inner_->axpy_inplace(x, delta, scale); });
}
void ProfilingOps::rope_inplace(Tensor& x, const std::vector<int32_t>& positions, const RopeTable& rope,
                                int64_t heads, int64_t head_stride, int64_t offset) {
  timed("rope", [&] { inner_->rope_inplace(x, positions, rope, heads, head_stride, offset); });
}
Tensor ProfilingOps::silu_and_mul(const Tensor& gate, const Tensor& up) {
  return timed("silu_and_mul", [&] { return inner_->silu_and_mul(gate, up); });
}
Tensor ProfilingOps::slice_cols(const Tensor& x, int64_t groups, int64_t begin, int64_t end) {
  return timed("slice_cols", [&] { return inner_->slice_cols(x, groups, begin, end); });
}
Tensor ProfilingOps::gather_rows(const Tensor& x, const std::vector<int64_t>& rows) {
  return timed("gather_rows", [&] { return inner_->gather_rows(x, rows); });
}
void ProfilingOps::scatter_rows(Tensor& dst, const std::vector<int64_t>& rows, const Tensor& src) {
  timed("scatter_rows", [&] { inner_->scatter_rows(dst, rows, src); });
}
Tensor ProfilingOps::concat_cols(const Tensor& a, const Tensor& b, int64_t groups, bool shared_b) {
  return timed("concat_cols", [&] { return inner_->concat_cols(a, b, groups, shared_b); });
}
Tensor ProfilingOps::linear(const Tensor& x, const LinearWeight& w) {
  // One row per projection (all layers summed); the name must outlive the
  // step, so it is interned.
  const std::string row = linear_row_name(w.name);
  const char* name = interned_.emplace(row).first->c_str();
  return timed(name, [&] { return inner_->linear(x, w); });
}
Tensor ProfilingOps::head_matmul(const Tensor& x, const Tensor& w, bool transpose_w) {
  return timed("head_matmul", [&] { return inner_->head_matmul(x, w, transpose_w); });
}
MoeRouting ProfilingOps::route_noaux_tc(const Tensor& router_logits, const Tensor& correction_bias,
                                        const RoutingParams& p) {
  return timed("route_noaux_tc", [&] { return inner_->route_noaux_tc(router_logits, correction_bias, p); });
}
MoeRouting ProfilingOps::route_softmax(const Tensor& router_logits, const RoutingParams& p) {
  return timed("route_softmax", [&] { return inner_->route_softmax(router_logits, p); });
}
Tensor ProfilingOps::fused_moe(const Tensor& x, const std::vector<ExpertWeights>& experts, const MoeRouting& r) {
  return timed("fused_moe", [&] { return inner_->fused_moe(x, experts, r); });
}
KvLayerCache ProfilingOps::allocate_kv(int64_t num_blocks, int64_t block_size, int64_t heads, int64_t k_dim,
                                       int64_t v_dim, bool latent, DType dtype) {
  return inner_->allocate_kv(num_blocks, block_size, heads, k_dim, v_dim, latent, dtype);
}
void ProfilingOps::store_kv(KvLayerCache& cache, const Tensor& k, const Tensor& v,
                            const std::vector<int64_t>& slots) {
  timed("store_kv", [&] { inner_->store_kv(cache, k, v, slots); });
}
Tensor ProfilingOps::paged_attention(const Tensor& q, const KvLayerCache& cache, const AttentionMeta& meta,
                                     float scale) {
  const bool latent = !cache.v.defined();  // MLA's latent cache has no separate values
  return timed(latent ? "paged_attention (latent)" : "paged_attention",
               [&] { return inner_->paged_attention(q, cache, meta, scale); });
}
Tensor ProfilingOps::gather_cached_k(const KvLayerCache& cache, const std::vector<int32_t>& block_table,
                                     int64_t num_tokens) {
  return timed("gather_cached_k", [&] { return inner_->gather_cached_k(cache, block_table, num_tokens); });
}
Tensor ProfilingOps::attention(const Tensor& q, const Tensor& k, const Tensor& v, float scale) {
  return timed("attention", [&] { return inner_->attention(q, k, v, scale); });
}

}  // namespace mx
