// A single-threaded, non-blocking HTTP/1.1 client for many concurrent
// streamed completions: plain sockets on one epoll set, one connection per
// request (as the seed's tool opens one session per request), SSE parsed
// incrementally as bytes arrive. Each read is timestamped once, right after
// recv() returns, and every event completed by that read gets that time: the
// moment the client could first have seen it.
#pragma once
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "bench/metrics.h"
#include "bench/stream_recorder.h"

struct sockaddr_storage;

namespace mx::bench {

struct HttpEndpoint {
  std::string host;
  int port = 80;
  std::string path;  // e.g. /v1/completions
};

// "http://host:port/path" (port defaults to 80). https is refused with a message.
HttpEndpoint parse_http_url(const std::string& url);

// Seconds on CLOCK_MONOTONIC (steady_clock on Linux), shared by the client, its
// callers and, through the result JSON, other processes on the same machine.
double monotonic_seconds();

class HttpStreamClient {
 public:
  using OnDone = std::function<void(size_t index, RequestOutcome outcome)>;
  // extra_headers: full "Name: value" lines (no CRLF).
  HttpStreamClient(HttpEndpoint endpoint, std::vector<std::string> extra_headers, OnDone on_done);
  ~HttpStreamClient();
  HttpStreamClient(const HttpStreamClient&) = delete;
  HttpStreamClient& operator=(const HttpStreamClient&) = delete;

  // Sends POST <path> with this JSON body now. `clock_origin` is subtracted
  // from every timestamp so outcomes are on the benchmark's clock.
  void start(size_t index, const std::string& json_body, ApiKind api, int64_t prompt_len,
             double clock_origin);
  // Waits up to timeout_s for socket activity and handles it.
  void poll(double timeout_s);
  size_t in_flight() const { return connections_.size(); }
  // Bytes and SSE events seen so far (for the overhead measurement).
  uint64_t events_received() const { return events_received_; }

 private:
  struct Connection;
  void handle(Connection& c, uint32_t events);
  void on_readable(Connection& c);
  void on_writable(Connection& c);
  void complete(int fd, RequestOutcome outcome);

  HttpEndpoint endpoint_;
  std::vector<std::string> extra_headers_;
  OnDone on_done_;
  int epoll_fd_ = -1;
  std::unique_ptr<sockaddr_storage> address_;
  unsigned address_len_ = 0;
  std::unordered_map<int, std::unique_ptr<Connection>> connections_;
  uint64_t events_received_ = 0;
};

// Lifts the open-file soft limit to the hard limit: each in-flight request is
// a socket, and 1024 would silently cap the concurrency.
void raise_open_file_limit();

}  // namespace mx::bench
