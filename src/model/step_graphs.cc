#include "model/step_graphs.h"

#include <algorithm>

#include "core/error.h"

namespace mx {

std::vector<int64_t> decode_graph_batch_sizes(int64_t max_num_seqs) {
  const int64_t top = max_num_seqs;
  std::vector<int64_t> sizes;
  for (int64_t b : {1, 2, 4})
    if (b < top) sizes.push_back(b);
  for (int64_t b = 8; b < top; b += 8) sizes.push_back(b);
  if (top >= 1) sizes.push_back(top);
  return sizes;
}

std::optional<DecodeGraphPlan> plan_decode_graph(const ForwardBatch& batch, const StepGraphConfig& config,
                                                 int64_t block_size) {
  if (config.batch_sizes.empty() || batch.seqs.empty() || block_size <= 0) return std::nullopt;
  int64_t blocks = 1;
  for (const SequenceSlice& s : batch.seqs) {
    if (s.num_new_tokens != 1 || !s.need_logits) return std::nullopt;
    blocks = std::max(blocks, (s.num_cached_tokens + 1 + block_size - 1) / block_size);
  }
  const int64_t n = int64_t(batch.seqs.size());
  if (int64_t(batch.token_ids.size()) != n) return std::nullopt;
  auto size = std::lower_bound(config.batch_sizes.begin(), config.batch_sizes.end(), n);
  if (size == config.batch_sizes.end()) return std::nullopt;
  int64_t width = 1;
  while (width < blocks) width *= 2;
  if (config.max_blocks_per_seq > 0) {
    if (blocks > config.max_blocks_per_seq) return std::nullopt;
    width = std::min(width, config.max_blocks_per_seq);
  }
  DecodeGraphPlan plan;
  plan.batch = n;
  plan.padded_batch = *size;
  plan.table_width = width;
  plan.key = (uint64_t(plan.padded_batch) << 32) | uint64_t(width);
  return plan;
}

ForwardBatch pad_decode_batch(const ForwardBatch& batch, const DecodeGraphPlan& plan, int32_t scratch_block) {
  MX_CHECK(plan.padded_batch >= int64_t(batch.seqs.size()) && scratch_block >= 0,
           "pad_decode_batch: {} sequences into {}, scratch block {}", batch.seqs.size(), plan.padded_batch,
           scratch_block);
  ForwardBatch padded = batch;
  for (int64_t i = int64_t(batch.seqs.size()); i < plan.padded_batch; ++i) {
    padded.token_ids.push_back(0);
    padded.positions.push_back(0);
    SequenceSlice s;
    s.num_cached_tokens = 0;
    s.num_new_tokens = 1;
    s.block_table = {scratch_block};
    s.need_logits = true;
    padded.seqs.push_back(std::move(s));
  }
  return padded;
}

}  // namespace mx
