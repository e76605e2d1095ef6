#include "server/openai_server.h"

#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <ctime>

#include "core/log.h"
#include "engine/output_text.h"
#include "server/field_reader.h"
#include "server/server_context.h"

namespace mx {

using nlohmann::json;

struct OpenAIServer::Context : ServerState {
  int listen_socket = -1;  // the bound listening socket (for its backlog)
};

namespace {

// Deeper JSON is refused before parsing: the parse itself is iterative, but
// copying, comparing, dumping and template rendering recurse per level, so a
// body of 100k '[' could overflow a thread's stack later on.
constexpr int kMaxJsonDepth = 64;

// Nesting depth of arrays/objects, brackets inside strings not counted. A cheap
// byte scan; malformed bodies are left to the parser.
int json_depth(const std::string& body) {
  int depth = 0, deepest = 0;
  bool in_string = false, escaped = false;
  for (const char c : body) {
    if (in_string) {
      if (escaped) escaped = false;
      else if (c == '\\') escaped = true;
      else if (c == '"') in_string = false;
    } else if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      deepest = std::max(deepest, ++depth);
      if (deepest > kMaxJsonDepth) break;
    } else if (c == ']' || c == '}') {
      --depth;
    }
  }
  return deepest;
}

}  // namespace

nlohmann::json parse_body(const httplib::Request& req) {
  if (json_depth(req.body) > kMaxJsonDepth)
    bad_request("", "the request body nests arrays/objects deeper than {} levels", kMaxJsonDepth);
  try {
    return json::parse(req.body);
  } catch (const json::exception& e) {  // parse_error, and out_of_range for numbers like 1e400
    bad_request("", "the request body is not valid JSON: {}", e.what());
  }
}

std::string token_text(const Tokenizer& tok, int32_t id) { return sanitize_utf8(tok.token_bytes(id)); }

json usage_json(int64_t prompt_tokens, int64_t completion_tokens) {
  return {{"prompt_tokens", prompt_tokens}, {"completion_tokens", completion_tokens}, {"total_tokens", prompt_tokens + completion_tokens}};
}

json stop_reason_json(const ChoiceDelta& d) {
  if (!d.stop_string.empty()) return d.stop_string;
  if (d.stop_token) return *d.stop_token;
  return nullptr;
}

namespace {

// Touches every byte of the key whatever was given, so the time taken reveals
// neither the key's content nor where a guess goes wrong.
bool constant_time_equal(const std::string& given, const std::string& key) {
  size_t diff = given.size() ^ key.size();
  for (size_t i = 0; i < key.size(); ++i)
    diff |= size_t(static_cast<unsigned char>(key[i]) ^ static_cast<unsigned char>(i < given.size() ? given[i] : 0));
  return diff == 0;
}

// Runs a handler; maps exceptions to OpenAI-shaped errors so nothing escapes.
template <typename F>
void guarded(httplib::Response& res, F&& f) {
  try {
    f();
  } catch (const ApiError& e) {
    send_error(res, e);
  } catch (const QueueFull& e) {
    send_error(res, ApiError(503, "server_overloaded", e.what()));
  } catch (const InvalidArgument& e) {
    send_error(res, ApiError(400, "invalid_request_error", e.what()));
  } catch (const std::exception& e) {
    log::error("request failed: {}", e.what());
    send_error(res, ApiError(500, "server_error", e.what()));
  }
}

// Counts a request as active from its handler until its response is written:
// a stream outlives its handler, so the count moves into the response's
// content-provider releaser, which runs when httplib is done with the response.
class ActiveRequest {
 public:
  explicit ActiveRequest(ServerState& s) : count_(s.active_requests) { ++count_; }
  ~ActiveRequest() { --count_; }
  ActiveRequest(const ActiveRequest&) = delete;
  ActiveRequest& operator=(const ActiveRequest&) = delete;

  static void hold_until_written(std::shared_ptr<ActiveRequest> active, httplib::Response& res) {
    if (!res.content_provider_) return;
    res.content_provider_resource_releaser_ = [active, previous = std::move(res.content_provider_resource_releaser_)](bool ok) {
      if (previous) previous(ok);
    };
  }

 private:
  std::atomic<int64_t>& count_;
};

void require_ready(const ServerState& s) {
  if (!s.ready) throw ApiError(503, "service_unavailable", "the model is still loading");
}

void handle_tokenize(ServerState& s, const httplib::Request& req, httplib::Response& res) {
  const json body = parse_body(req);
  const ServedModel& model = *s.model;
  check_model_name(body, model);
  FieldReader r(body, "request");
  r.ignore("model");
  std::vector<int32_t> tokens;
  const bool add_special = r.boolean("add_special_tokens").value_or(true);
  if (auto prompt = r.string("prompt")) {
    tokens = encode_prompt(*prompt, model, add_special);
  } else if (const json* messages = r.raw("messages")) {
    const auto ordered = nlohmann::ordered_json::parse(req.body);
    const bool add_generation_prompt = r.boolean("add_generation_prompt").value_or(true);
    const json* tools = r.raw("tools");
    const auto ordered_tools = tools ? ordered.at("tools") : nlohmann::ordered_json(nullptr);
    tokens = encode_prompt(render_chat(normalize_messages(messages, ordered.at("messages")), ordered_tools,
                                       add_generation_prompt, nullptr, model), model, false);
  } else {
    bad_request("prompt", "'prompt' (a string) or 'messages' is required");
  }
  r.reject_unknown();
  send_json(res, 200, {{"count", tokens.size()}, {"max_model_len", model.max_model_len}, {"tokens", tokens}});
}

void handle_detokenize(ServerState& s, const httplib::Request& req, httplib::Response& res) {
  const json body = parse_body(req);
  const ServedModel& model = *s.model;
  check_model_name(body, model);
  FieldReader r(body, "request");
  r.ignore("model");
  const json* tokens = r.raw("tokens");
  if (!tokens || !tokens->is_array()) bad_request("tokens", "'tokens' must be a list of token ids");
  std::vector<int32_t> ids;
  for (const auto& t : *tokens) {
    if (!t.is_number_integer() || t.get<int64_t>() < 0 || t.get<int64_t>() >= model.vocab_limit)
      bad_request("tokens", "'tokens' must hold token ids in [0, {})", model.vocab_limit);
    ids.push_back(t.get<int32_t>());
  }
  r.reject_unknown();
  send_json(res, 200, {{"prompt", sanitize_utf8(model.tokenizer.decode(ids, false))}});
}

}  // namespace

OpenAIServer::OpenAIServer(ServerOptions options)
    : options_(std::move(options)), http_(std::make_unique<httplib::Server>()), ctx_(std::make_unique<Context>()) {
  const int threads = options_.http_threads;
  http_->new_task_queue = [threads] { return new httplib::ThreadPool(size_t(threads)); };
  http_->set_payload_max_length(options_.max_body_bytes);
  http_->set_read_timeout(options_.read_timeout_s, 0);
  http_->set_write_timeout(60, 0);
  http_->set_socket_options([ctx = ctx_.get()](socket_t sock) {
    httplib::default_socket_options(sock);
    ctx->listen_socket = int(sock);
  });
  install_routes();
}

OpenAIServer::~OpenAIServer() { stop(); }

void OpenAIServer::install_routes() {
  ServerState& s = *ctx_;
  const std::string api_key = options_.api_key;
  http_->set_pre_routing_handler([api_key, &s](const httplib::Request& req, httplib::Response& res) {
    if (s.draining) {
      res.set_header("Connection", "close");
      send_error(res, ApiError(503, "service_unavailable", "the server is shutting down"));
      return httplib::Server::HandlerResponse::Handled;
    }
    if (api_key.empty() || req.path == "/health") return httplib::Server::HandlerResponse::Unhandled;
    const std::string auth = req.get_header_value("Authorization");
    const std::string prefix = "Bearer ";
    const std::string given = auth.rfind(prefix, 0) == 0 ? auth.substr(prefix.size()) : std::string();
    if (constant_time_equal(given, api_key)) return httplib::Server::HandlerResponse::Unhandled;
    send_error(res, ApiError(401, "invalid_request_error", "a valid API key is required (Authorization: Bearer KEY)", "", "invalid_api_key"));
    return httplib::Server::HandlerResponse::Handled;
  });
  // Fills bodies the library leaves empty (404 unknown route, 413 too large, ...).
  http_->set_error_handler(httplib::Server::HandlerWithResponse([](const httplib::Request& req, httplib::Response& res) {
    if (!res.body.empty()) return httplib::Server::HandlerResponse::Unhandled;
    const int status = res.status;
    std::string message = status == 404 ? fmt::format("no route {} {}", req.method, req.path)
                        : status == 413 ? "the request body is too large"
                                        : fmt::format("HTTP error {}", status);
    send_error(res, ApiError(status, status == 404 ? "not_found_error" : "invalid_request_error", message));
    return httplib::Server::HandlerResponse::Handled;
  }));
  http_->set_exception_handler([](const httplib::Request&, httplib::Response& res, std::exception_ptr) {
    send_error(res, ApiError(500, "server_error", "internal error"));
  });

  http_->Get("/health", [&s](const httplib::Request&, httplib::Response& res) {
    if (s.ready) send_json(res, 200, {{"status", "ok"}});
    else send_json(res, 503, error_body(503, "service_unavailable", "the model is still loading"));
  });
  http_->Get("/v1/models", [&s](const httplib::Request&, httplib::Response& res) {
    guarded(res, [&] {
      require_ready(s);
      json card = {{"id", s.model->name}, {"object", "model"}, {"created", std::time(nullptr)},
                   {"owned_by", "mxserve"}, {"max_model_len", s.model->max_model_len}};
      send_json(res, 200, {{"object", "list"}, {"data", json::array({card})}});
    });
  });
  http_->Get("/metrics", [&s](const httplib::Request&, httplib::Response& res) {
    guarded(res, [&] {
      require_ready(s);
      res.set_content(s.engine->metrics().render_prometheus(), "text/plain; version=0.0.4");
    });
  });
  auto post = [&](const char* path, void (*handler)(ServerState&, const httplib::Request&, httplib::Response&)) {
    http_->Post(path, [&s, handler](const httplib::Request& req, httplib::Response& res) {
      auto active = std::make_shared<ActiveRequest>(s);
      guarded(res, [&] {
        require_ready(s);
        handler(s, req, res);
      });
      ActiveRequest::hold_until_written(std::move(active), res);
    });
  };
  post("/v1/completions", handle_completions);
  post("/v1/chat/completions", handle_chat);
  post("/tokenize", handle_tokenize);
  post("/detokenize", handle_detokenize);
}

int OpenAIServer::start() {
  int port = options_.port;
  if (port == 0) {
    port = http_->bind_to_any_port(options_.host);
  } else if (!http_->bind_to_port(options_.host, port)) {
    port = -1;
  }
  if (port < 0) fail_input("cannot listen on {}:{} (address in use or not local?)", options_.host, options_.port);
  // cpp-httplib 0.11 listens with a backlog of 5: a burst of connections
  // beyond it (hundreds of clients at once) had SYNs dropped, waited minutes
  // and some were reset. listen() again on the bound socket raises it.
  if (ctx_->listen_socket >= 0 && ::listen(ctx_->listen_socket, SOMAXCONN) != 0)
    log::warn("could not raise the listen backlog to {}: {}", SOMAXCONN, std::strerror(errno));
  thread_ = std::thread([this] { http_->listen_after_bind(); });
  return port;
}

void OpenAIServer::attach(Engine& engine, ServedModel model) {
  ctx_->engine = &engine;
  ctx_->model.emplace(std::move(model));
  ctx_->ready = true;
}

void OpenAIServer::wait() {
  if (thread_.joinable()) thread_.join();
}

void OpenAIServer::stop_accepting() { ctx_->draining = true; }

int64_t OpenAIServer::active_requests() const { return ctx_->active_requests; }

void OpenAIServer::stop() {
  if (http_) http_->stop();
  wait();
}

}  // namespace mx
