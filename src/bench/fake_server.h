// A fast, scripted OpenAI-style streaming server for measuring the benchmark
// client itself (`mxserve bench fake-server`, hidden). Every request gets
// ceil(max_tokens / tokens_per_chunk) choices chunks: the first after ttft_ms,
// then one every itl_ms, then a usage chunk and [DONE]. One thread, epoll,
// a timer heap: it serves thousands of streams without being the bottleneck.
#pragma once

namespace mx::bench {

struct FakeServerOptions {
  int port = 0;  // 0: the kernel picks; the port is printed either way
  double ttft_ms = 0;
  double itl_ms = 0;
  int tokens_per_chunk = 1;
};

// Prints "listening on 127.0.0.1:PORT" to stdout, then serves until killed.
[[noreturn]] void run_fake_server(const FakeServerOptions& options);

}  // namespace mx::bench
