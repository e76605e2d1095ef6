// The OpenAI-compatible HTTP server (cpp-httplib, a thread per connection
// from a pool). It only speaks the protocol: requests become engine requests,
// engine deltas become responses or SSE chunks.
#pragma once
#include <atomic>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <thread>

#include "engine/engine.h"
#include "server/openai_request.h"

namespace httplib {
class Server;
struct Request;
struct Response;
}  // namespace httplib

namespace mx {

struct ServerOptions {
  std::string host = "127.0.0.1";
  int port = 8000;                      // 0: any free port
  std::string api_key;                  // empty: no authentication
  size_t max_body_bytes = 32u << 20;    // larger bodies get a 413
  int http_threads = 64;                // concurrent connections served
};

class OpenAIServer {
 public:
  explicit OpenAIServer(ServerOptions options);
  ~OpenAIServer();

  // Binds and serves on a background thread. Until attach(), /health answers
  // 503 and the API routes 503 ("loading"). Returns the bound port.
  int start();
  void attach(Engine& engine, ServedModel model);
  void wait();  // until stop()
  void stop();

 private:
  struct Context;
  void install_routes();

  ServerOptions options_;
  std::unique_ptr<httplib::Server> http_;
  std::unique_ptr<Context> ctx_;
  std::thread thread_;
};

}  // namespace mx
