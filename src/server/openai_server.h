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
  int read_timeout_s = 60;              // a client silent this long mid-request is dropped
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
  // Graceful shutdown, first step: from now on new requests get 503 while
  // those in flight (streams included) go on; stop() once none is active.
  void stop_accepting();
  int64_t active_requests() const;
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
