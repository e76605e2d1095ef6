#include "bench/stream_recorder.h"

#include <nlohmann/json.hpp>

#include "core/error.h"

namespace mx::bench {

StreamRecorder::StreamRecorder(ApiKind api, double start_s, int64_t prompt_len) : api_(api) {
  out_.start_s = start_s;
  out_.prompt_len = prompt_len;
}

namespace {
// The text a choices chunk carries (may be absent or null, e.g. a chunk that
// only has a finish_reason).
std::string chunk_text(const nlohmann::json& choice, ApiKind api) {
  const nlohmann::json* holder = &choice;
  if (api == ApiKind::ChatCompletions) {
    auto d = choice.find("delta");
    if (d == choice.end() || !d->is_object()) return {};
    holder = &*d;
  }
  auto t = holder->find(api == ApiKind::ChatCompletions ? "content" : "text");
  return t != holder->end() && t->is_string() ? t->get<std::string>() : std::string();
}
}  // namespace

void StreamRecorder::on_event(std::string_view data, double now_s) {
  if (data == "[DONE]") return;
  const auto chunk = nlohmann::json::parse(data, nullptr, /*allow_exceptions=*/false);
  if (chunk.is_discarded() || !chunk.is_object())
    mx::fail("stream chunk is not a JSON object: '{}'", data.substr(0, 200));
  if (auto err = chunk.find("error"); err != chunk.end())
    mx::fail("server sent an error in the stream: {}", err->dump());
  auto choices = chunk.find("choices");
  if (choices != chunk.end() && choices->is_array() && !choices->empty()) {
    const double since_start = now_s - out_.start_s;
    if (!first_chunk_seen_) {
      first_chunk_seen_ = true;
      out_.ttft_s = since_start;
    } else {
      out_.itl_s.push_back(now_s - last_chunk_s_);
    }
    last_chunk_s_ = now_s;
    out_.generated_text += chunk_text((*choices)[0], api_);
  }
  auto usage = chunk.find("usage");
  if (usage != chunk.end() && usage->is_object()) {
    auto tokens = usage->find("completion_tokens");
    if (tokens != usage->end() && tokens->is_number_integer()) out_.output_tokens = tokens->get<int64_t>();
  }
}

RequestOutcome StreamRecorder::finish() {
  if (!first_chunk_seen_) return fail("Never received a valid chunk to calculate TTFT.");
  out_.success = true;
  out_.latency_s = last_chunk_s_ - out_.start_s;
  return std::move(out_);
}

RequestOutcome StreamRecorder::fail(std::string error) {
  out_.success = false;
  out_.error = std::move(error);
  if (first_chunk_seen_) out_.latency_s = last_chunk_s_ - out_.start_s;
  return std::move(out_);
}

}  // namespace mx::bench
