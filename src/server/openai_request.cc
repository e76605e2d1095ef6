#include "server/openai_request.h"

#include <algorithm>

#include "core/error.h"
#include "server/api_error.h"
#include "server/field_reader.h"

namespace mx {

using nlohmann::json;
using nlohmann::ordered_json;

namespace {

// obj[key] is the string `want`; false when missing or not a string
// (json::value(key, "") throws type_error when the key holds an object:
// fuzz_request found a tool whose "type" was an object ending the process).
bool string_is(const json& obj, const char* key, const char* want) {
  const auto it = obj.find(key);
  return it != obj.end() && it->is_string() && it->get_ref<const std::string&>() == want;
}

constexpr int64_t kMaxN = 16;

std::vector<std::string> read_stop(FieldReader& r) {
  const json* v = r.raw("stop");
  if (!v) return {};
  if (v->is_string()) return {v->get<std::string>()};
  if (!v->is_array()) bad_request("stop", "'stop' must be a string or a list of strings");
  if (v->size() > 16) bad_request("stop", "'stop' holds at most 16 strings, got {}", v->size());
  std::vector<std::string> out;
  for (const auto& s : *v) {
    if (!s.is_string() || s.get<std::string>().empty()) bad_request("stop", "'stop' entries must be non-empty strings");
    out.push_back(s.get<std::string>());
  }
  return out;
}

std::vector<int32_t> read_token_list(const json& v, const std::string& param, int32_t vocab_limit) {
  std::vector<int32_t> out;
  for (const auto& t : v) {
    if (!t.is_number_integer()) bad_request(param, "'{}' must hold integer token ids", param);
    const int64_t id = t.get<int64_t>();
    if (id < 0 || id >= vocab_limit) bad_request(param, "token id {} in '{}' is outside the vocabulary [0, {})", id, param, vocab_limit);
    out.push_back(int32_t(id));
  }
  return out;
}

std::unordered_map<int32_t, float> read_logit_bias(FieldReader& r, int32_t vocab_limit) {
  std::unordered_map<int32_t, float> out;
  const json* v = r.raw("logit_bias");
  if (!v) return out;
  if (!v->is_object()) bad_request("logit_bias", "'logit_bias' must be an object mapping token ids to numbers");
  for (const auto& [key, bias] : v->items()) {
    int64_t id = -1;
    try {
      size_t used = 0;
      id = std::stoll(key, &used);
      if (used != key.size()) id = -1;
    } catch (const std::exception&) {
    }
    if (id < 0 || id >= vocab_limit) bad_request("logit_bias", "'logit_bias' key '{}' is not a token id in [0, {})", key, vocab_limit);
    if (!bias.is_number()) bad_request("logit_bias", "'logit_bias' values must be numbers");
    out[int32_t(id)] = bias.get<float>();
  }
  return out;
}

StreamFlags read_stream(FieldReader& r) {
  StreamFlags f;
  f.stream = r.boolean("stream").value_or(false);
  if (const json* opts = r.raw("stream_options")) {
    if (!f.stream) bad_request("stream_options", "'stream_options' is only allowed with 'stream': true");
    FieldReader o(*opts, "stream_options");
    f.include_usage = o.boolean("include_usage").value_or(false);
    o.reject_unknown();
  }
  return f;
}

// Fields shared by completions and chat.
void read_sampling(FieldReader& r, SamplingParams& p, int32_t vocab_limit) {
  if (auto v = r.number("temperature")) p.temperature = float(*v);
  if (auto v = r.number("top_p")) p.top_p = float(*v);
  if (auto v = r.integer("top_k", -1, INT32_MAX)) p.top_k = int32_t(*v);
  if (auto v = r.number("min_p")) p.min_p = float(*v);
  if (auto v = r.number("presence_penalty")) p.presence_penalty = float(*v);
  if (auto v = r.number("frequency_penalty")) p.frequency_penalty = float(*v);
  if (auto v = r.number("repetition_penalty")) p.repetition_penalty = float(*v);
  if (auto v = r.integer("seed", INT64_MIN, INT64_MAX)) p.seed = uint64_t(*v);
  p.stop = read_stop(r);
  if (const json* v = r.raw("stop_token_ids")) {
    if (!v->is_array()) bad_request("stop_token_ids", "'stop_token_ids' must be a list of token ids");
    p.stop_token_ids = read_token_list(*v, "stop_token_ids", vocab_limit);
  }
  p.ignore_eos = r.boolean("ignore_eos").value_or(false);
  p.min_tokens = r.integer("min_tokens", 0, INT64_MAX).value_or(0);
  p.skip_special_tokens = r.boolean("skip_special_tokens").value_or(true);
  p.logit_bias = read_logit_bias(r, vocab_limit);
  r.ignore("user");
  r.ignore("model");  // checked by check_model_name
}

void validate_params(const SamplingParams& p, int32_t vocab_limit) {
  try {
    p.validate(vocab_limit);
  } catch (const InvalidArgument& e) {
    bad_request("", "{}", e.what());
  }
}

std::vector<PromptInput> read_prompts(FieldReader& r, const ServedModel& model) {
  const json* v = r.raw("prompt");
  if (!v) bad_request("prompt", "'prompt' is required");
  auto from_text = [&](const std::string& s) { return PromptInput{encode_prompt(s, model, true), s}; };
  auto from_ids = [&](const json& ids) {
    auto tokens = read_token_list(ids, "prompt", model.vocab_limit);
    return PromptInput{tokens, model.tokenizer.decode(tokens, false)};
  };
  std::vector<PromptInput> out;
  if (v->is_string()) {
    out.push_back(from_text(v->get<std::string>()));
  } else if (v->is_array() && !v->empty() && v->at(0).is_number_integer()) {
    out.push_back(from_ids(*v));
  } else if (v->is_array() && !v->empty()) {
    for (const auto& item : *v) {
      if (item.is_string()) out.push_back(from_text(item.get<std::string>()));
      else if (item.is_array()) out.push_back(from_ids(item));
      else bad_request("prompt", "'prompt' lists must hold strings or token-id lists");
    }
  } else {
    bad_request("prompt", "'prompt' must be a string, a list of strings, a token-id list or a list of token-id lists (non-empty)");
  }
  if (out.size() > 64) bad_request("prompt", "at most 64 prompts per request, got {}", out.size());
  for (const auto& p : out)
    if (p.tokens.empty()) bad_request("prompt", "a prompt is empty");
  return out;
}

json normalize_content(const json& content, const std::string& where) {
  if (content.is_null() || content.is_string()) return content;
  if (!content.is_array()) bad_request(where, "'{}' must be a string or a list of content parts", where);
  std::string text;
  for (const auto& part : content) {
    if (!part.is_object() || !string_is(part, "type", "text") || !part.contains("text") || !part["text"].is_string())
      bad_request(where, "'{}' parts must be {{\"type\": \"text\", \"text\": ...}}; this server serves text only", where);
    text += part["text"].get<std::string>();
  }
  return text;
}

}  // namespace

ordered_json normalize_messages(const json* messages, const ordered_json& ordered) {
  if (!messages || !messages->is_array() || messages->empty()) bad_request("messages", "'messages' must be a non-empty list");
  ordered_json out = ordered_json::array();
  for (size_t i = 0; i < messages->size(); ++i) {
    const std::string where = fmt::format("messages[{}]", i);
    FieldReader m((*messages)[i], where);
    std::string role = m.string("role").value_or("");
    if (role == "developer") role = "system";
    if (role != "system" && role != "user" && role != "assistant" && role != "tool")
      bad_request(where + ".role", "'{}.role' must be system, developer, user, assistant or tool", where);
    ordered_json msg = {{"role", role}};
    const json* content = m.raw("content");
    msg["content"] = content ? ordered_json(normalize_content(*content, where + ".content")) : ordered_json(nullptr);
    if (auto name = m.string("name")) msg["name"] = *name;
    if (auto id = m.string("tool_call_id")) msg["tool_call_id"] = *id;
    if (const json* calls = m.raw("tool_calls")) {
      if (!calls->is_array()) bad_request(where + ".tool_calls", "'tool_calls' must be a list");
      msg["tool_calls"] = ordered.at(i).at("tool_calls");  // client's key order, for `tojson`
    }
    if (auto rc = m.string("reasoning_content")) msg["reasoning_content"] = *rc;
    m.reject_unknown();
    out.push_back(std::move(msg));
  }
  return out;
}

namespace {

void read_tools(FieldReader& r, bool& parse_tool_calls, bool& parallel) {
  const json* tools = r.raw("tools");
  if (tools) {
    if (!tools->is_array()) bad_request("tools", "'tools' must be a list");
    for (const auto& t : *tools)
      if (!t.is_object() || !string_is(t, "type", "function") || !t.contains("function") || !t["function"].is_object() ||
          !t["function"].contains("name") || !t["function"]["name"].is_string())
        bad_request("tools", "each tool must be {{\"type\": \"function\", \"function\": {{\"name\": ...}}}}");
  }
  std::string choice = "auto";
  if (const json* tc = r.raw("tool_choice")) {
    if (!tc->is_string() || (tc->get<std::string>() != "auto" && tc->get<std::string>() != "none"))
      bad_request("tool_choice", "'tool_choice' supports \"auto\" and \"none\"; forcing a tool needs constrained decoding, which this server does not do");
    choice = tc->get<std::string>();
  }
  parallel = r.boolean("parallel_tool_calls").value_or(true);
  parse_tool_calls = tools && !tools->empty() && choice == "auto";
}

void read_response_format(FieldReader& r) {
  const json* rf = r.raw("response_format");
  if (!rf) return;
  if (!rf->is_object() || !rf->contains("type") || !(*rf)["type"].is_string())
    bad_request("response_format", "'response_format' must be an object with a 'type'");
  const std::string type = (*rf)["type"].get<std::string>();
  if (type == "text") return;
  bad_request("response_format", "response_format '{}' is not supported: this server has no constrained decoding, "
              "so it cannot guarantee JSON output; ask for JSON in the prompt instead", type);
}

bool ends_with_think_open(const std::string& prompt) {
  size_t end = prompt.find_last_not_of(" \n\t");
  if (end == std::string::npos) return false;
  const std::string tag = "<think>";
  return end + 1 >= tag.size() && prompt.compare(end + 1 - tag.size(), tag.size(), tag) == 0;
}

}  // namespace

void check_model_name(const json& body, const ServedModel& model) {
  if (!body.is_object() || !body.contains("model") || body["model"].is_null()) return;
  if (!body["model"].is_string()) bad_request("model", "'model' must be a string");
  if (body["model"].get<std::string>() != model.name)
    throw ApiError(404, "invalid_request_error", fmt::format("the model '{}' does not exist; this server serves '{}'",
                   body["model"].get<std::string>(), model.name), "model", "model_not_found");
}

std::vector<int32_t> encode_prompt(const std::string& text, const ServedModel& model, bool add_special_tokens) {
  std::vector<int32_t> ids = model.tokenizer.encode(text, true);
  const auto bos = model.tokenizer.bos_id();
  if (add_special_tokens && model.tokenizer.add_bos() && bos && (ids.empty() || ids.front() != *bos)) ids.insert(ids.begin(), *bos);
  return ids;
}

std::string render_chat(const ordered_json& messages, const ordered_json& tools, bool add_generation_prompt,
                        const ordered_json& template_kwargs, const ServedModel& model) {
  if (!model.chat_template) bad_request("messages", "this model has no chat template; use /v1/completions");
  try {
    return model.chat_template->render_ordered(messages, tools, add_generation_prompt, template_kwargs);
  } catch (const InvalidArgument& e) {
    bad_request("messages", "the chat template rejected the messages: {}", e.what());
  }
}

CompletionRequest parse_completion_request(const json& body, const ServedModel& model) {
  check_model_name(body, model);
  FieldReader r(body, "request");
  CompletionRequest req;
  req.prompts = read_prompts(r, model);
  read_sampling(r, req.params, model.vocab_limit);
  req.params.max_tokens = r.integer("max_tokens", INT64_MIN, INT64_MAX).value_or(16);
  req.n = int32_t(r.integer("n", 1, kMaxN).value_or(1));
  if (auto best_of = r.integer("best_of", 1, kMaxN); best_of && *best_of != req.n)
    bad_request("best_of", "'best_of' other than 'n' is not supported");
  req.params.logprobs = int32_t(r.integer("logprobs", 0, kMaxLogprobs).value_or(-1));
  req.echo = r.boolean("echo").value_or(false);
  if (req.echo && req.params.logprobs >= 0)
    bad_request("echo", "'echo' with 'logprobs' needs prompt logprobs, which this server does not compute");
  if (auto suffix = r.string("suffix"); suffix && !suffix->empty()) bad_request("suffix", "'suffix' is not supported");
  req.stream = read_stream(r);
  r.reject_unknown();
  validate_params(req.params, model.vocab_limit);
  return req;
}

ChatRequest parse_chat_request(const json& body, const ordered_json& ordered_body, const ServedModel& model) {
  check_model_name(body, model);
  FieldReader r(body, "request");
  ChatRequest req;
  const json* raw_messages = r.raw("messages");
  if (!raw_messages) bad_request("messages", "'messages' is required");
  const ordered_json messages = normalize_messages(raw_messages, ordered_body.at("messages"));
  read_sampling(r, req.params, model.vocab_limit);
  read_tools(r, req.parse_tool_calls, req.parallel_tool_calls);
  const ordered_json tools = req.parse_tool_calls ? ordered_body.at("tools") : ordered_json(nullptr);
  read_response_format(r);
  req.n = int32_t(r.integer("n", 1, kMaxN).value_or(1));
  const bool logprobs = r.boolean("logprobs").value_or(false);
  const auto top = r.integer("top_logprobs", 0, kMaxLogprobs);
  if (top && !logprobs) bad_request("top_logprobs", "'top_logprobs' needs 'logprobs': true");
  req.params.logprobs = logprobs ? int32_t(top.value_or(0)) : -1;
  ordered_json kwargs = nullptr;
  if (const json* k = r.raw("chat_template_kwargs")) {
    if (!k->is_object()) bad_request("chat_template_kwargs", "'chat_template_kwargs' must be an object");
    kwargs = ordered_body.at("chat_template_kwargs");
  }
  const bool add_generation_prompt = r.boolean("add_generation_prompt").value_or(true);
  auto max_tokens = r.integer("max_completion_tokens", INT64_MIN, INT64_MAX);
  if (auto legacy = r.integer("max_tokens", INT64_MIN, INT64_MAX); !max_tokens) max_tokens = legacy;
  req.stream = read_stream(r);
  r.reject_unknown();

  req.prompt.text = render_chat(messages, tools, add_generation_prompt, kwargs, model);
  req.prompt.tokens = encode_prompt(req.prompt.text, model, false);
  req.starts_in_reasoning = ends_with_think_open(req.prompt.text);
  const int64_t room = model.max_model_len - int64_t(req.prompt.tokens.size());
  if (room < 1)
    bad_request("messages", "the messages take {} tokens; this model's maximum context length is {} tokens",
                req.prompt.tokens.size(), model.max_model_len);
  req.params.max_tokens = max_tokens.value_or(room);
  validate_params(req.params, model.vocab_limit);
  return req;
}

}  // namespace mx
