#include "model/greedy.h"

#include <algorithm>
#include <chrono>
#include <numeric>

#include "core/error.h"

namespace mx {

int32_t argmax(const float* logits, int64_t n) {
  return int32_t(std::max_element(logits, logits + n) - logits);
}

namespace {

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// One step of `count` new tokens of the sequence starting at `cached`.
std::vector<float> step(CausalLM& model, const std::vector<int32_t>& ids, int64_t cached, int64_t count,
                        const std::vector<int32_t>& block_table) {
  ForwardBatch b;
  b.token_ids.assign(ids.begin() + cached, ids.begin() + cached + count);
  b.positions.resize(size_t(count));
  std::iota(b.positions.begin(), b.positions.end(), int32_t(cached));
  b.seqs.push_back({cached, count, block_table, true});
  return model.forward(b).to_f32_vector();
}

}  // namespace

GreedyResult greedy_generate(CausalLM& model, const std::vector<int32_t>& prompt, const GreedyOptions& o) {
  if (prompt.empty()) fail_input("greedy generation needs a non-empty prompt");
  if (o.max_new_tokens < 0 || o.block_size <= 0) fail_input("bad generation options");
  const int64_t total = int64_t(prompt.size()) + o.max_new_tokens;
  const int64_t blocks = (total + o.block_size - 1) / o.block_size;
  model.allocate_kv_cache(blocks, o.block_size, o.kv_dtype);
  std::vector<int32_t> table(static_cast<size_t>(blocks));
  std::iota(table.begin(), table.end(), 0);
  const int64_t vocab = model.config().vocab_size;

  GreedyResult r;
  std::vector<int32_t> ids = prompt;
  auto t0 = std::chrono::steady_clock::now();
  const int64_t chunk = o.prefill_chunk > 0 ? o.prefill_chunk : int64_t(prompt.size());
  std::vector<float> logits;
  for (int64_t done = 0; done < int64_t(prompt.size()); done += chunk)
    logits = step(model, ids, done, std::min<int64_t>(chunk, int64_t(prompt.size()) - done), table);
  r.prompt_seconds = seconds_since(t0);
  r.prompt_logits = logits;
  t0 = std::chrono::steady_clock::now();
  for (int64_t i = 0; i < o.max_new_tokens; ++i) {
    if (int64_t(logits.size()) != vocab) fail("model returned {} logits for a vocabulary of {}", logits.size(), vocab);
    int32_t next = argmax(logits.data(), vocab);
    r.tokens.push_back(next);
    r.step_logits.push_back(logits);
    ids.push_back(next);
    if (std::find(o.stop_ids.begin(), o.stop_ids.end(), next) != o.stop_ids.end()) break;
    if (i + 1 < o.max_new_tokens) logits = step(model, ids, int64_t(ids.size()) - 1, 1, table);
  }
  r.decode_seconds = seconds_since(t0);
  return r;
}

}  // namespace mx
