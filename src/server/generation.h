// One HTTP request's generation: a request stream per prompt in the engine,
// polled together; choices are numbered prompt-major (prompt i, choice j ->
// i * n + j) as OpenAI does. Destroying an unfinished Generation aborts it,
// so a handler that stops early (client gone, exception) frees its KV blocks.
#pragma once
#include <chrono>
#include <memory>
#include <vector>

#include "engine/engine.h"
#include "server/openai_request.h"

namespace mx {

struct IndexedDelta {
  int32_t choice = 0;  // global choice index
  ChoiceDelta delta;
};

class Generation {
 public:
  // Submits every prompt; throws what Engine::submit throws (after aborting the ones already queued).
  Generation(Engine& engine, const std::vector<PromptInput>& prompts, const SamplingParams& params, int32_t n);
  ~Generation();
  Generation(const Generation&) = delete;
  Generation& operator=(const Generation&) = delete;

  std::vector<IndexedDelta> poll(std::chrono::milliseconds timeout);
  bool done() const;
  void abort();
  int32_t num_choices() const { return int32_t(streams_.size()) * n_; }
  int64_t prompt_tokens() const;
  int64_t completion_tokens() const { return completion_tokens_; }

 private:
  Engine& engine_;
  int32_t n_;
  std::vector<std::shared_ptr<RequestStream>> streams_;
  int64_t completion_tokens_ = 0;  // summed from finished choices
};

}  // namespace mx
