// --profile-ops: an Ops that forwards every call to the backend's Ops and
// times it on the backend's clock (op_clock.h: CUDA events on the GPU), so a
// run shows where a step's time goes. Times are summed per op name (and per
// region the model marks, e.g. "all_reduce") separately for decode steps
// (every sequence adds one token; by batch size, in powers of two) and
// prefill steps (any other); a step's span
// runs from the start of its first op to the end of its last, so span minus
// the ops' sum is time the device waited for the host (launch gaps, host work
// between ops). The points of a step are read back when the next step begins
// (by then the step's logits were read, so nothing waits) and when the profile
// is reported. Recording costs a few microseconds of host time per op: a
// profiled run is slower than an unprofiled one; compare shares, not totals.
#pragma once
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "ops/ops.h"

namespace mx {

// Totals of one kind of step.
struct StepProfile {
  int64_t steps = 0;
  int64_t tokens = 0;      // new tokens over those steps
  int64_t sequences = 0;   // sequences over those steps
  double span_ms = 0;      // first op start to last op end, summed
  struct Entry {
    int64_t calls = 0;
    double ms = 0;
  };
  std::map<std::string, Entry> entries;  // op or region name -> totals
};

struct OpProfile {
  // Decode steps by batch size: key b holds steps of b/2+1 .. b sequences
  // (1, 2, 3-4, 5-8, ...), so runs at different concurrencies stay apart.
  std::map<int64_t, StepProfile> decode;
  StepProfile prefill;
  // The bucket key of a decode step of n sequences.
  static int64_t decode_bucket(int64_t n);
};

class ProfilingOps : public Ops {
 public:
  // label names the profile in the report ("rank 1").
  ProfilingOps(std::unique_ptr<Ops> inner, std::string label);
  ~ProfilingOps() override;  // logs the report

  // Totals so far (reads back the pending step first).
  const OpProfile& profile();
  // A table per kind of step: per op calls/step, ms/step, share of the span.
  std::string report();

  Tensor empty(DType dtype, Shape shape) override { return inner_->empty(dtype, std::move(shape)); }
  Tensor to_host(const Tensor& t) override;
  void begin_step() override;
  void prepare(const std::vector<int32_t>& values) override { inner_->prepare(values); }
  void prepare(const std::vector<int64_t>& values) override { inner_->prepare(values); }
  void* device_stream() override { return inner_->device_stream(); }
  void prepare(const AttentionMeta& meta) override;
  std::unique_ptr<OpClock> make_clock() override { return inner_->make_clock(); }
  void begin_region(const char* name) override;
  void end_region() override;

  Tensor embedding(const Tensor& table, const std::vector<int32_t>& ids) override;
  Tensor rms_norm(const Tensor& x, const Tensor& weight, float eps) override;
  Tensor add_rms_norm(Tensor& residual, const Tensor& delta, const Tensor& weight, float eps) override;
  void add_inplace(Tensor& x, const Tensor& delta) override;
  void axpy_inplace(Tensor& x, const Tensor& delta, float scale) override;
  void rope_inplace(Tensor& x, const std::vector<int32_t>& positions, const RopeTable& rope, int64_t heads,
                    int64_t head_stride, int64_t offset) override;
  Tensor silu_and_mul(const Tensor& gate, const Tensor& up) override;
  Tensor slice_cols(const Tensor& x, int64_t groups, int64_t begin, int64_t end) override;
  Tensor gather_rows(const Tensor& x, const std::vector<int64_t>& rows) override;
  void scatter_rows(Tensor& dst, const std::vector<int64_t>& rows, const Tensor& src) override;
  Tensor concat_cols(const Tensor& a, const Tensor& b, int64_t groups, bool shared_b) override;
  Tensor linear(const Tensor& x, const LinearWeight& w) override;
  Tensor head_matmul(const Tensor& x, const Tensor& w, bool transpose_w) override;
  MoeRouting route_noaux_tc(const Tensor& router_logits, const Tensor& correction_bias,
                            const RoutingParams& p) override;
  MoeRouting route_softmax(const Tensor& router_logits, const RoutingParams& p) override;
  Tensor fused_moe(const Tensor& x, const std::vector<ExpertWeights>& experts, const MoeRouting& r) override;
  KvLayerCache allocate_kv(int64_t num_blocks, int64_t block_size, int64_t heads, int64_t k_dim, int64_t v_dim,
                           bool latent, DType dtype) override;
  void store_kv(KvLayerCache& cache, const Tensor& k, const Tensor& v, const std::vector<int64_t>& slots) override;
  Tensor paged_attention(const Tensor& q, const KvLayerCache& cache, const AttentionMeta& meta,
                         float scale) override;
  Tensor gather_cached_k(const KvLayerCache& cache, const std::vector<int32_t>& block_table,
                         int64_t num_tokens) override;
  Tensor attention(const Tensor& q, const Tensor& k, const Tensor& v, float scale) override;

 private:
  struct Timed {
    const char* name;
    int begin, end;
  };
  // Runs fn between two clock points and remembers them under name.
  template <typename F>
  decltype(auto) timed(const char* name, F&& fn);
  void flush();  // reads back the pending step's points into profile_

  std::unique_ptr<Ops> inner_;
  std::string label_;
  std::unique_ptr<OpClock> clock_;
  OpProfile profile_;
  std::vector<Timed> pending_;
  std::vector<std::pair<const char*, int>> open_regions_;
  std::set<std::string> interned_;  // op row names built at run time (linear projections)
  bool step_is_decode_ = false;
  int64_t step_tokens_ = 0, step_sequences_ = 0;
};

}  // namespace mx
