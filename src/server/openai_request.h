// Parsing and validation of OpenAI requests into what the engine runs.
// Every field the server reads is honored; fields it does not understand, and
// supported fields with values it cannot honor, are rejected with a 400.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "engine/sampling_params.h"
#include "tokenizer/chat_template.h"
#include "tokenizer/tokenizer.h"

namespace mx {

struct ServedModel {
  const Tokenizer& tokenizer;
  const ChatTemplate* chat_template;  // nullptr: chat requests are refused
  std::string name;                   // --served-model-name
  int64_t max_model_len = 0;
  int32_t vocab_limit = 0;            // token ids must be below this
};

struct PromptInput {
  std::vector<int32_t> tokens;
  std::string text;  // for echo
};

struct StreamFlags {
  bool stream = false;
  bool include_usage = false;  // stream_options.include_usage
};

struct CompletionRequest {
  std::vector<PromptInput> prompts;
  SamplingParams params;
  int32_t n = 1;
  StreamFlags stream;
  bool echo = false;
};

struct ChatRequest {
  PromptInput prompt;
  SamplingParams params;
  int32_t n = 1;
  StreamFlags stream;
  bool parse_tool_calls = false;    // tools given and tool_choice allows them
  bool parallel_tool_calls = true;  // false: keep only the first call
  bool starts_in_reasoning = false; // the prompt opened a <think> block
};

CompletionRequest parse_completion_request(const nlohmann::json& body, const ServedModel& model);
// ordered_body: the same body parsed keeping key order; messages, tools and
// template kwargs reach the chat template from it, so `tojson` prints keys in
// the client's order as Python would.
ChatRequest parse_chat_request(const nlohmann::json& body, const nlohmann::ordered_json& ordered_body, const ServedModel& model);
// Validates messages (roles, text content parts) into what chat templates take.
nlohmann::ordered_json normalize_messages(const nlohmann::json* messages, const nlohmann::ordered_json& ordered_messages);
// Checks the optional `model` field against the served name (404 when it differs).
void check_model_name(const nlohmann::json& body, const ServedModel& model);
// Renders messages with the chat template (shared with /tokenize).
std::string render_chat(const nlohmann::ordered_json& messages, const nlohmann::ordered_json& tools, bool add_generation_prompt,
                        const nlohmann::ordered_json& template_kwargs, const ServedModel& model);
// Encodes prompt text: special-token text becomes special tokens; BOS is
// prepended when the tokenizer asks for it and the text does not start with it.
std::vector<int32_t> encode_prompt(const std::string& text, const ServedModel& model, bool add_special_tokens);

}  // namespace mx
