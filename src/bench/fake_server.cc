#include "bench/fake_server.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <memory>
#include <queue>
#include <string>
#include <tuple>
#include <unordered_map>

#include <fmt/format.h>

#include "bench/http_stream_client.h"
#include "core/error.h"

namespace mx::bench {
namespace {

struct Stream {
  int fd = -1;
  uint64_t serial = 0;  // tells a reused fd's new stream from stale timer entries
  std::string in;      // request bytes so far
  std::string out;     // bytes not yet accepted by the socket
  bool responding = false;
  bool chat = false;
  int64_t chunks_left = 0;
  int64_t tokens_total = 0;
  int64_t tokens_sent = 0;
  double next_due = 0;
  bool finished = false;  // everything queued; close once `out` drains
};

// Reads "max_tokens": N (or max_completion_tokens) out of the JSON body
// without a full parse: this server must stay cheap.
int64_t max_tokens_of(const std::string& body) {
  for (const char* key : {"\"max_tokens\"", "\"max_completion_tokens\""}) {
    size_t pos = body.find(key);
    if (pos == std::string::npos) continue;
    pos = body.find(':', pos);
    if (pos == std::string::npos) break;
    return std::max<int64_t>(1, std::strtoll(body.c_str() + pos + 1, nullptr, 10));
  }
  return 16;
}

void append_chunk(std::string& out, const std::string& sse) {
  out += fmt::format("{:x}\r\n", sse.size());
  out += sse;
  out += "\r\n";
}

class FakeServer {
 public:
  explicit FakeServer(const FakeServerOptions& o) : o_(o) {
    listen_fd_ = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    const int one = 1;
    setsockopt(listen_fd_, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    addr.sin_port = htons(uint16_t(o.port));
    if (bind(listen_fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0)
      fail_input("fake-server: cannot bind 127.0.0.1:{}: {}", o.port, std::strerror(errno));
    listen(listen_fd_, 4096);
    socklen_t len = sizeof addr;
    getsockname(listen_fd_, reinterpret_cast<sockaddr*>(&addr), &len);
    port_ = ntohs(addr.sin_port);
    epoll_fd_ = epoll_create1(EPOLL_CLOEXEC);
    watch(listen_fd_, EPOLLIN, EPOLL_CTL_ADD);
  }

  [[noreturn]] void serve() {
    std::printf("listening on 127.0.0.1:%d\n", port_);
    std::fflush(stdout);
    epoll_event events[512];
    while (true) {
      double timeout_ms = 100;
      if (!due_.empty()) timeout_ms = std::max(0.0, (std::get<0>(due_.top()) - monotonic_seconds()) * 1000);
      const int n = epoll_wait(epoll_fd_, events, 512, int(std::ceil(timeout_ms)));
      for (int i = 0; i < n; ++i) {
        const int fd = events[i].data.fd;
        if (fd == listen_fd_) accept_all();
        else if (auto it = streams_.find(fd); it != streams_.end()) on_socket(*it->second, events[i].events);
      }
      run_due();
    }
  }

 private:
  void watch(int fd, uint32_t events, int op) {
    epoll_event ev{};
    ev.events = events;
    ev.data.fd = fd;
    epoll_ctl(epoll_fd_, op, fd, &ev);
  }

  void accept_all() {
    while (true) {
      const int fd = accept4(listen_fd_, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
      if (fd < 0) return;
      const int one = 1;
      setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
      auto s = std::make_unique<Stream>();
      s->fd = fd;
      s->serial = ++next_serial_;
      watch(fd, EPOLLIN, EPOLL_CTL_ADD);
      streams_.emplace(fd, std::move(s));
    }
  }

  void on_socket(Stream& s, uint32_t events) {
    if (events & (EPOLLHUP | EPOLLERR)) return drop(s);
    if (events & EPOLLIN) {
      char buf[16384];
      while (true) {
        const ssize_t n = recv(s.fd, buf, sizeof buf, 0);
        if (n > 0) {
          if (!s.responding) s.in.append(buf, size_t(n));
          continue;
        }
        if (n == 0) return drop(s);
        if (errno != EAGAIN && errno != EWOULDBLOCK) return drop(s);
        break;
      }
      if (!s.responding) return maybe_start(s);  // may drop s
    }
    if (events & EPOLLOUT) flush(s);
  }

  void maybe_start(Stream& s) {
    const size_t header_end = s.in.find("\r\n\r\n");
    if (header_end == std::string::npos) return;
    size_t content_length = 0;
    const size_t cl = s.in.find("Content-Length:");
    if (cl != std::string::npos && cl < header_end)
      content_length = size_t(std::strtoull(s.in.c_str() + cl + 15, nullptr, 10));
    if (s.in.size() < header_end + 4 + content_length) return;
    const std::string body = s.in.substr(header_end + 4, content_length);
    s.chat = s.in.compare(0, 30, "POST /v1/chat/completions HTTP") == 0;
    s.responding = true;
    s.tokens_total = max_tokens_of(body);
    s.chunks_left = (s.tokens_total + o_.tokens_per_chunk - 1) / o_.tokens_per_chunk;
    s.in.clear();
    s.out += "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n"
             "Connection: close\r\n\r\n";
    s.next_due = monotonic_seconds() + o_.ttft_ms / 1000;
    due_.emplace(s.next_due, s.fd, s.serial);
    flush(s);
  }

  void emit_next_chunk(Stream& s) {
    const int64_t tokens = std::min<int64_t>(o_.tokens_per_chunk, s.tokens_total - s.tokens_sent);
    s.tokens_sent += tokens;
    std::string text;
    for (int64_t i = 0; i < tokens; ++i) text += " tok";
    const bool last = --s.chunks_left == 0;
    const char* finish = last ? "\"length\"" : "null";
    append_chunk(s.out, s.chat
        ? fmt::format(R"(data: {{"id":"chatcmpl-fake","object":"chat.completion.chunk","created":0,"model":"fake","choices":[{{"index":0,"delta":{{"content":"{}"}},"finish_reason":{}}}]}})" "\n\n", text, finish)
        : fmt::format(R"(data: {{"id":"cmpl-fake","object":"text_completion","created":0,"model":"fake","choices":[{{"index":0,"text":"{}","logprobs":null,"finish_reason":{}}}]}})" "\n\n", text, finish));
    if (last) {
      append_chunk(s.out, fmt::format(
          R"(data: {{"id":"cmpl-fake","object":"text_completion","created":0,"model":"fake","choices":[],"usage":{{"prompt_tokens":0,"completion_tokens":{0},"total_tokens":{0}}}}})" "\n\n",
          s.tokens_total));
      append_chunk(s.out, "data: [DONE]\n\n");
      s.out += "0\r\n\r\n";
      s.finished = true;
    } else {
      s.next_due += o_.itl_ms / 1000;
      due_.emplace(s.next_due, s.fd, s.serial);
    }
  }

  void run_due() {
    const double now = monotonic_seconds();
    while (!due_.empty() && std::get<0>(due_.top()) <= now) {
      const auto [when, fd, serial] = due_.top();
      due_.pop();
      auto it = streams_.find(fd);
      if (it == streams_.end() || it->second->serial != serial) continue;
      emit_next_chunk(*it->second);
      flush(*it->second);
    }
  }

  void flush(Stream& s) {
    while (!s.out.empty()) {
      const ssize_t n = send(s.fd, s.out.data(), s.out.size(), MSG_NOSIGNAL);
      if (n < 0) {
        if (errno == EAGAIN || errno == EWOULDBLOCK) {
          watch(s.fd, EPOLLIN | EPOLLOUT, EPOLL_CTL_MOD);
          return;
        }
        return drop(s);
      }
      s.out.erase(0, size_t(n));
    }
    if (s.finished) return drop(s);
    watch(s.fd, EPOLLIN, EPOLL_CTL_MOD);
  }

  void drop(Stream& s) {
    const int fd = s.fd;
    epoll_ctl(epoll_fd_, EPOLL_CTL_DEL, fd, nullptr);
    close(fd);
    streams_.erase(fd);  // stale heap entries are skipped in run_due
  }

  FakeServerOptions o_;
  int listen_fd_ = -1, epoll_fd_ = -1, port_ = 0;
  std::unordered_map<int, std::unique_ptr<Stream>> streams_;
  uint64_t next_serial_ = 0;
  using Due = std::tuple<double, int, uint64_t>;
  std::priority_queue<Due, std::vector<Due>, std::greater<>> due_;
};

}  // namespace

void run_fake_server(const FakeServerOptions& options) {
  if (options.tokens_per_chunk < 1) fail_input("--tokens-per-chunk must be at least 1");
  if (options.ttft_ms < 0 || options.itl_ms < 0) fail_input("delays must be >= 0");
  raise_open_file_limit();
  FakeServer(options).serve();
}

}  // namespace mx::bench
