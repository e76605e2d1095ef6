// Turns the SSE events of one streamed completion into a RequestOutcome, with
// the seed's definitions: TTFT at the first chunk whose `choices` is
// non-empty, one ITL sample per further choices chunk (however many tokens it
// carries), E2EL at the last choices chunk, output tokens from `usage`.
#pragma once
#include <string_view>

#include "bench/metrics.h"

namespace mx::bench {

enum class ApiKind { Completions, ChatCompletions };

class StreamRecorder {
 public:
  // start_s: when the request was sent, on the benchmark clock (seconds).
  StreamRecorder(ApiKind api, double start_s, int64_t prompt_len);
  // One SSE event's data, received at now_s. Throws mx::Error on bad JSON.
  void on_event(std::string_view data, double now_s);
  // The response ended normally; success needs at least one choices chunk.
  RequestOutcome finish();
  // Transport or HTTP failure.
  RequestOutcome fail(std::string error);

 private:
  ApiKind api_;
  RequestOutcome out_;
  bool first_chunk_seen_ = false;
  double last_chunk_s_ = 0;
};

}  // namespace mx::bench
