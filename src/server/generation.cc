#include "server/generation.h"

namespace mx {

Generation::Generation(Engine& engine, const std::vector<PromptInput>& prompts, const SamplingParams& params, int32_t n)
    : engine_(engine), n_(n) {
  try {
    for (const auto& p : prompts) streams_.push_back(engine.submit(EngineRequest{p.tokens, params, n}));
  } catch (...) {
    abort();
    throw;
  }
}

Generation::~Generation() {
  if (!done()) abort();
}

void Generation::abort() {
  for (auto& s : streams_)
    if (!s->done()) engine_.abort(s);
}

bool Generation::done() const {
  for (const auto& s : streams_)
    if (!s->done()) return false;
  return true;
}

int64_t Generation::prompt_tokens() const {
  int64_t total = 0;
  for (const auto& s : streams_) total += s->num_prompt_tokens();
  return total;
}

std::vector<IndexedDelta> Generation::poll(std::chrono::milliseconds timeout) {
  std::vector<IndexedDelta> out;
  bool waited = false;
  for (size_t i = 0; i < streams_.size(); ++i) {
    if (streams_[i]->done()) continue;
    // Block on the first unfinished stream only; the others are just drained.
    auto deltas = streams_[i]->wait(waited ? std::chrono::milliseconds(0) : timeout);
    waited = true;
    for (auto& d : deltas) {
      if (d.finish_reason) completion_tokens_ += d.num_generated;
      const int32_t choice = int32_t(i) * n_ + d.index;
      out.push_back({choice, std::move(d)});
    }
  }
  return out;
}

}  // namespace mx
