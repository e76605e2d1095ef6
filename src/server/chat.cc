// POST /v1/chat/completions: plain and streamed, with reasoning_content and
// tool_calls split out of the generated text.
#include <memory>

#include "server/chat_output.h"
#include "server/sse_response.h"
#include "server/generation.h"
#include "server/server_context.h"

namespace mx {

using nlohmann::json;

namespace {

json token_bytes_json(const std::string& raw) {
  json bytes = json::array();
  for (unsigned char c : raw) bytes.push_back(int(c));
  return bytes;
}

// OpenAI's chat logprobs entries: {token, logprob, bytes, top_logprobs: [...]}.
json chat_logprob_entries(const Tokenizer& tok, const ChoiceDelta& d) {
  json entries = json::array();
  for (const auto& lp : d.logprobs) {
    json top = json::array();
    for (const auto& [id, v] : lp.top)
      top.push_back({{"token", token_text(tok, id)}, {"logprob", v}, {"bytes", token_bytes_json(tok.token_bytes(id))}});
    entries.push_back({{"token", token_text(tok, lp.token)}, {"logprob", lp.logprob},
                       {"bytes", token_bytes_json(tok.token_bytes(lp.token))}, {"top_logprobs", top}});
  }
  return entries;
}

json tool_calls_json(const std::vector<ToolCall>& calls, bool parallel, bool with_index) {
  json out = json::array();
  for (size_t i = 0; i < calls.size() && (parallel || i == 0); ++i) {
    json call = {{"id", calls[i].id}, {"type", "function"}, {"function", {{"name", calls[i].name}, {"arguments", calls[i].arguments}}}};
    if (with_index) call["index"] = i;
    out.push_back(call);
  }
  return out;
}

struct ChatChoice {
  ChatOutputParser parser;
  std::string content, reasoning;
  json logprobs = json::array();
  bool role_sent = false;
};

std::vector<ChatChoice> make_choices(const ChatRequest& r, int32_t count) {
  std::vector<ChatChoice> choices;
  for (int32_t i = 0; i < count; ++i) choices.push_back({ChatOutputParser(r.starts_in_reasoning, r.parse_tool_calls), {}, {}, json::array(), false});
  return choices;
}

json finish_json(const ChoiceDelta& d, bool has_tool_calls) {
  if (has_tool_calls && d.finish_reason == FinishReason::Stop) return "tool_calls";
  return finish_reason_name(*d.finish_reason);
}

void respond_whole(ServerState& state, ChatRequest& request, httplib::Response& res) {
  Generation gen(*state.engine, {request.prompt}, request.params, request.n);
  auto choices = make_choices(request, gen.num_choices());
  std::vector<json> finish(choices.size()), stop(choices.size());
  while (!gen.done()) {
    for (auto& [index, d] : gen.poll(std::chrono::milliseconds(100))) {
      if (d.finish_reason == FinishReason::Error) throw ApiError(500, "server_error", "generation failed: " + d.error);
      ChatChoice& c = choices[size_t(index)];
      ChatTextDelta t = c.parser.feed(d.text);
      if (d.finish_reason) {
        ChatTextDelta rest = c.parser.finish();
        t.content += rest.content;
        t.reasoning += rest.reasoning;
        finish[size_t(index)] = finish_json(d, !c.parser.tool_calls().empty());
        stop[size_t(index)] = stop_reason_json(d);
      }
      c.content += t.content;
      c.reasoning += t.reasoning;
      for (auto& e : chat_logprob_entries(state.model->tokenizer, d)) c.logprobs.push_back(e);
    }
  }
  json out = json::array();
  for (size_t i = 0; i < choices.size(); ++i) {
    const ChatChoice& c = choices[i];
    json message = {{"role", "assistant"}, {"content", c.content}};
    if (!c.reasoning.empty()) message["reasoning_content"] = c.reasoning;
    if (!c.parser.tool_calls().empty()) {
      message["tool_calls"] = tool_calls_json(c.parser.tool_calls(), request.parallel_tool_calls, false);
      if (c.content.empty()) message["content"] = nullptr;
    }
    json logprobs = request.params.logprobs >= 0 ? json{{"content", c.logprobs}} : json(nullptr);
    out.push_back({{"index", i}, {"message", message}, {"logprobs", logprobs}, {"finish_reason", finish[i]}, {"stop_reason", stop[i]}});
  }
  send_json(res, 200, {{"id", state.make_id("chatcmpl")}, {"object", "chat.completion"}, {"created", std::time(nullptr)},
                       {"model", state.model->name}, {"choices", out},
                       {"usage", usage_json(gen.prompt_tokens(), gen.completion_tokens())}});
}

struct ChatStream {
  ServerState& state;
  ChatRequest request;
  std::unique_ptr<Generation> gen;
  std::string id;
  std::time_t created = std::time(nullptr);
  std::vector<ChatChoice> choices;
  bool finished = false;

  std::string event(int32_t index, json delta, const json& logprobs, const json& finish, const json& stop = nullptr) const {
    json choice = {{"index", index}, {"delta", std::move(delta)}, {"logprobs", logprobs}, {"finish_reason", finish}};
    if (!finish.is_null()) choice["stop_reason"] = stop;
    return sse_event({{"id", id}, {"object", "chat.completion.chunk"}, {"created", created}, {"model", state.model->name},
                      {"choices", json::array({choice})}});
  }

  std::string on_delta(int32_t index, const ChoiceDelta& d) {
    if (d.finish_reason == FinishReason::Error) return sse_event(error_body(500, "server_error", "generation failed: " + d.error));
    ChatChoice& c = choices[size_t(index)];
    std::string out;
    if (!c.role_sent) {
      out += event(index, {{"role", "assistant"}, {"content", ""}}, nullptr, nullptr);
      c.role_sent = true;
    }
    ChatTextDelta t = c.parser.feed(d.text);
    if (d.finish_reason) {
      ChatTextDelta rest = c.parser.finish();
      t.content += rest.content;
      t.reasoning += rest.reasoning;
    }
    json logprobs = request.params.logprobs >= 0 ? json{{"content", chat_logprob_entries(state.model->tokenizer, d)}} : json(nullptr);
    if (!t.empty() || (!logprobs.is_null() && !d.logprobs.empty())) {
      json delta = json::object();
      if (!t.reasoning.empty()) delta["reasoning_content"] = t.reasoning;
      if (!t.content.empty() || t.reasoning.empty()) delta["content"] = t.content;
      out += event(index, delta, logprobs, nullptr);
    }
    if (d.finish_reason) {
      const auto& calls = c.parser.tool_calls();
      if (!calls.empty()) out += event(index, {{"tool_calls", tool_calls_json(calls, request.parallel_tool_calls, true)}}, nullptr, nullptr);
      out += event(index, json::object(), nullptr, finish_json(d, !calls.empty()), stop_reason_json(d));
    }
    return out;
  }

  std::string next(std::chrono::milliseconds timeout) {
    std::string out;
    for (auto& [index, d] : gen->poll(timeout)) out += on_delta(index, d);
    if (gen->done()) {
      if (request.stream.include_usage) {
        out += sse_event({{"id", id}, {"object", "chat.completion.chunk"}, {"created", created}, {"model", state.model->name},
                          {"choices", json::array()}, {"usage", usage_json(gen->prompt_tokens(), gen->completion_tokens())}});
      }
      out += kSseDone;
      finished = true;
    }
    return out;
  }
};

}  // namespace

void handle_chat(ServerState& state, const httplib::Request& req, httplib::Response& res) {
  const json body = parse_body(req);
  ChatRequest request = parse_chat_request(body, nlohmann::ordered_json::parse(req.body), *state.model);
  if (!request.stream.stream) return respond_whole(state, request, res);

  auto stream = std::make_shared<ChatStream>(ChatStream{state, std::move(request), nullptr, state.make_id("chatcmpl"), std::time(nullptr), {}, false});
  stream->gen = std::make_unique<Generation>(*state.engine, std::vector<PromptInput>{stream->request.prompt},
                                             stream->request.params, stream->request.n);
  stream->choices = make_choices(stream->request, stream->gen->num_choices());
  respond_sse(res, stream);
}

}  // namespace mx
