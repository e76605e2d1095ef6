// POST /v1/completions: plain and streamed.
#include <memory>

#include "server/generation.h"
#include "server/sse_response.h"
#include "server/server_context.h"

namespace mx {

using nlohmann::json;

namespace {

// OpenAI's completions logprobs: parallel lists, top_logprobs as {text: logprob}.
struct CompletionLogprobs {
  json tokens = json::array(), token_logprobs = json::array(), top_logprobs = json::array(), text_offset = json::array();
  size_t offset = 0;

  void add(const Tokenizer& tok, const ChoiceDelta& d) {
    for (const auto& lp : d.logprobs) {
      const std::string text = token_text(tok, lp.token);
      tokens.push_back(text);
      token_logprobs.push_back(lp.logprob);
      json top = json::object();
      for (const auto& [id, v] : lp.top) top[token_text(tok, id)] = v;
      top_logprobs.push_back(top);
      text_offset.push_back(offset);
      offset += text.size();
    }
  }
  json to_json() const {
    return {{"tokens", tokens}, {"token_logprobs", token_logprobs}, {"top_logprobs", top_logprobs}, {"text_offset", text_offset}};
  }
};

struct CompletionChoice {
  std::string text;
  CompletionLogprobs logprobs;
  json finish_reason = nullptr, stop_reason = nullptr;
  bool started = false;  // echo text sent
};

json choice_json(int32_t index, const std::string& text, const json& logprobs, const json& finish, const json& stop) {
  return {{"index", index}, {"text", text}, {"logprobs", logprobs}, {"finish_reason", finish}, {"stop_reason", stop}};
}

void raise_if_error(const ChoiceDelta& d) {
  if (d.finish_reason == FinishReason::Error) throw ApiError(500, "server_error", "generation failed: " + d.error);
}

struct CompletionStream {
  ServerState& state;
  CompletionRequest request;
  std::unique_ptr<Generation> gen;
  std::string id;
  std::time_t created = std::time(nullptr);
  std::vector<CompletionChoice> choices;
  bool finished = false;

  json chunk(json choices_json) const {
    return {{"id", id}, {"object", "text_completion"}, {"created", created}, {"model", state.model->name}, {"choices", choices_json}};
  }

  // Next SSE text to send (maybe empty); sets `finished` after [DONE].
  std::string next(std::chrono::milliseconds timeout) {
    std::string out;
    for (auto& [index, d] : gen->poll(timeout)) {
      CompletionChoice& c = choices[size_t(index)];
      std::string text = d.text;
      if (!c.started && request.echo) text = request.prompts[size_t(index / request.n)].text + text;
      c.started = true;
      json logprobs = nullptr;
      if (request.params.logprobs >= 0) {
        CompletionLogprobs lp;
        lp.offset = c.logprobs.offset;
        lp.add(state.model->tokenizer, d);
        c.logprobs.offset = lp.offset;
        logprobs = lp.to_json();
      }
      if (d.finish_reason == FinishReason::Error) {
        out += sse_event(error_body(500, "server_error", "generation failed: " + d.error));
        continue;
      }
      json finish = d.finish_reason ? json(finish_reason_name(*d.finish_reason)) : json(nullptr);
      if (text.empty() && !d.finish_reason && d.logprobs.empty()) continue;
      out += sse_event(chunk(json::array({choice_json(index, text, logprobs, finish, stop_reason_json(d))})));
    }
    if (gen->done()) {
      if (request.stream.include_usage) {
        json last = chunk(json::array());
        last["usage"] = usage_json(gen->prompt_tokens(), gen->completion_tokens());
        out += sse_event(last);
      }
      out += kSseDone;
      finished = true;
    }
    return out;
  }
};

void respond_whole(ServerState& state, CompletionRequest& request, httplib::Response& res) {
  Generation gen(*state.engine, request.prompts, request.params, request.n);
  std::vector<CompletionChoice> choices(size_t(gen.num_choices()));
  for (size_t i = 0; i < choices.size(); ++i)
    if (request.echo) choices[i].text = request.prompts[i / size_t(request.n)].text;
  for (auto& c : choices) c.logprobs.offset = c.text.size();
  while (!gen.done()) {
    for (auto& [index, d] : gen.poll(std::chrono::milliseconds(100))) {
      raise_if_error(d);
      CompletionChoice& c = choices[size_t(index)];
      c.text += d.text;
      c.logprobs.add(state.model->tokenizer, d);
      if (d.finish_reason) {
        c.finish_reason = finish_reason_name(*d.finish_reason);
        c.stop_reason = stop_reason_json(d);
      }
    }
  }
  json out_choices = json::array();
  for (size_t i = 0; i < choices.size(); ++i) {
    const auto& c = choices[i];
    json logprobs = request.params.logprobs >= 0 ? c.logprobs.to_json() : json(nullptr);
    out_choices.push_back(choice_json(int32_t(i), c.text, logprobs, c.finish_reason, c.stop_reason));
  }
  send_json(res, 200, {{"id", state.make_id("cmpl")}, {"object", "text_completion"}, {"created", std::time(nullptr)},
                       {"model", state.model->name}, {"choices", out_choices},
                       {"usage", usage_json(gen.prompt_tokens(), gen.completion_tokens())}});
}

}  // namespace

void handle_completions(ServerState& state, const httplib::Request& req, httplib::Response& res) {
  const json body = parse_body(req);
  CompletionRequest request = parse_completion_request(body, *state.model);
  if (!request.stream.stream) return respond_whole(state, request, res);

  auto stream = std::make_shared<CompletionStream>(CompletionStream{state, std::move(request), nullptr, state.make_id("cmpl"), std::time(nullptr), {}, false});
  stream->gen = std::make_unique<Generation>(*state.engine, stream->request.prompts, stream->request.params, stream->request.n);
  stream->choices.resize(size_t(stream->gen->num_choices()));
  respond_sse(res, stream);
}

}  // namespace mx
