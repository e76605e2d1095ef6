// The channel between the engine loop (producer) and one HTTP handler
// (consumer) for one request: per-choice deltas of text, token ids and
// logprobs, ending with a finish reason per choice.
#pragma once
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "engine/sampler.h"

namespace mx {

enum class FinishReason { Stop, Length, Abort, Error };
const char* finish_reason_name(FinishReason r);  // "stop", "length", "abort", "error"

struct ChoiceDelta {
  int32_t index = 0;                 // choice index (0..n-1)
  std::string text;                  // new text, safe to show
  std::vector<int32_t> token_ids;    // new tokens whose text is in the output
  std::vector<TokenLogprob> logprobs;  // one per token id (when requested)
  int64_t num_generated = 0;         // tokens generated for this choice so far (stop tokens included)
  std::optional<FinishReason> finish_reason;
  std::string stop_string;           // the stop string that ended the choice, if any
  std::optional<int32_t> stop_token; // the stop token that ended it, if any
  std::string error;                 // with FinishReason::Error
};

class RequestStream {
 public:
  RequestStream(int64_t id, int32_t num_choices, int64_t num_prompt_tokens)
      : id_(id), unfinished_(num_choices), num_prompt_tokens_(num_prompt_tokens) {}

  int64_t id() const { return id_; }
  int64_t num_prompt_tokens() const { return num_prompt_tokens_; }
  // Waits up to `timeout` for deltas; returns those that arrived (maybe none).
  std::vector<ChoiceDelta> wait(std::chrono::milliseconds timeout);
  // True once every choice has finished and all deltas were taken.
  bool done() const;

  // Engine side.
  void push(ChoiceDelta delta);
  bool cancelled() const { return cancelled_; }
  void mark_cancelled() { cancelled_ = true; }

 private:
  const int64_t id_;
  mutable std::mutex mutex_;
  std::condition_variable ready_;
  std::deque<ChoiceDelta> pending_;
  int32_t unfinished_;
  const int64_t num_prompt_tokens_;
  std::atomic<bool> cancelled_{false};
};

}  // namespace mx
