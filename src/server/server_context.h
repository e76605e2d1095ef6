// What route handlers share: the engine and model once loaded, and helpers
// to answer with JSON and OpenAI-shaped errors.
#pragma once
#include <atomic>
#include <chrono>
#include <optional>
#include <string>

#include <httplib.h>
#include <nlohmann/json.hpp>

#include "engine/engine.h"
#include "server/api_error.h"
#include "server/openai_request.h"

namespace mx {

struct ServerState {
  std::atomic<bool> ready{false};
  Engine* engine = nullptr;
  std::optional<ServedModel> model;
  std::atomic<int64_t> next_id{0};
  std::atomic<bool> draining{false};        // shutting down: new requests get 503
  std::atomic<int64_t> active_requests{0};  // API requests whose response is not fully written

  std::string make_id(const char* prefix) { return fmt::format("{}-{}-{}", prefix, std::time(nullptr), next_id++); }
};

inline std::string dump_json(const nlohmann::json& j) { return j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace); }

inline void send_json(httplib::Response& res, int status, const nlohmann::json& body) {
  res.status = status;
  res.set_content(dump_json(body), "application/json");
}

inline void send_error(httplib::Response& res, const ApiError& e) {
  send_json(res, e.status, error_body(e.status, e.type, e.what(), e.param, e.code));
}

// Parses a JSON body (400 on bad JSON).
nlohmann::json parse_body(const httplib::Request& req);

// Route handlers (completions.cc, chat.cc).
void handle_completions(ServerState& state, const httplib::Request& req, httplib::Response& res);
void handle_chat(ServerState& state, const httplib::Request& req, httplib::Response& res);

// SSE framing.
inline std::string sse_event(const nlohmann::json& j) { return "data: " + dump_json(j) + "\n\n"; }
inline const std::string kSseDone = "data: [DONE]\n\n";

// Token text for logprobs (invalid UTF-8 replaced).
std::string token_text(const Tokenizer& tok, int32_t id);
nlohmann::json usage_json(int64_t prompt_tokens, int64_t completion_tokens);
nlohmann::json stop_reason_json(const ChoiceDelta& d);

}  // namespace mx
