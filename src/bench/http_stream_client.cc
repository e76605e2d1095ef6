#include "bench/http_stream_client.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include <fmt/format.h>

#include "bench/sse_parser.h"
#include "core/error.h"

namespace mx::bench {

HttpEndpoint parse_http_url(const std::string& url) {
  constexpr std::string_view scheme = "http://";
  if (url.rfind("https://", 0) == 0)
    fail_input("'{}': https is not supported by the benchmark client; use http://", url);
  if (url.rfind(scheme, 0) != 0) fail_input("'{}' is not an http:// URL", url);
  const std::string rest = url.substr(scheme.size());
  const size_t slash = rest.find('/');
  const std::string authority = rest.substr(0, slash);
  HttpEndpoint ep;
  ep.path = slash == std::string::npos ? "/" : rest.substr(slash);
  const size_t colon = authority.rfind(':');
  const bool bracketed = !authority.empty() && authority.front() == '[';
  if (colon != std::string::npos && (!bracketed || authority.find(']') < colon)) {
    ep.host = authority.substr(0, colon);
    try {
      ep.port = std::stoi(authority.substr(colon + 1));
    } catch (const std::exception&) {
      fail_input("'{}': bad port", url);
    }
  } else {
    ep.host = authority;
  }
  if (bracketed) ep.host = ep.host.substr(1, ep.host.size() - 2);
  if (ep.host.empty() || ep.port <= 0 || ep.port > 65535) fail_input("'{}': bad host or port", url);
  return ep;
}

double monotonic_seconds() {
  using namespace std::chrono;
  return duration<double>(steady_clock::now().time_since_epoch()).count();
}

void raise_open_file_limit() {
  rlimit lim{};
  if (getrlimit(RLIMIT_NOFILE, &lim) == 0 && lim.rlim_cur < lim.rlim_max) {
    lim.rlim_cur = lim.rlim_max;
    setrlimit(RLIMIT_NOFILE, &lim);
  }
}

struct HttpStreamClient::Connection {
  Connection(ApiKind api, double start_s, int64_t prompt_len)
      : recorder(api, start_s, prompt_len),
        http([this](std::string_view b) { on_body(b); }),
        sse([this](std::string_view d) { on_event(d); }) {}

  void on_body(std::string_view bytes) {
    if (http.status() == 200) sse.feed(bytes);
    else if (error_body.size() < 2000) error_body.append(bytes.substr(0, 2000 - error_body.size()));
  }
  void on_event(std::string_view data) {
    ++*events_counter;
    recorder.on_event(data, read_time - clock_origin);
  }

  int fd = -1;
  size_t index = 0;
  double clock_origin = 0;
  double read_time = 0;
  std::string request;
  size_t written = 0;
  bool connected = false;
  std::string error_body;
  uint64_t* events_counter = nullptr;
  StreamRecorder recorder;
  HttpResponseParser http;
  SseParser sse;
};

HttpStreamClient::HttpStreamClient(HttpEndpoint endpoint, std::vector<std::string> extra_headers,
                                   OnDone on_done)
    : endpoint_(std::move(endpoint)),
      extra_headers_(std::move(extra_headers)),
      on_done_(std::move(on_done)),
      address_(std::make_unique<sockaddr_storage>()) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  const std::string port = std::to_string(endpoint_.port);
  if (int rc = getaddrinfo(endpoint_.host.c_str(), port.c_str(), &hints, &found); rc != 0)
    fail_input("cannot resolve '{}': {}", endpoint_.host, gai_strerror(rc));
  std::memcpy(address_.get(), found->ai_addr, found->ai_addrlen);
  address_len_ = found->ai_addrlen;
  freeaddrinfo(found);
  epoll_fd_ = epoll_create1(EPOLL_CLOEXEC);
  if (epoll_fd_ < 0) fail("epoll_create1: {}", std::strerror(errno));
}

HttpStreamClient::~HttpStreamClient() {
  for (auto& [fd, c] : connections_) close(fd);
  if (epoll_fd_ >= 0) close(epoll_fd_);
}

void HttpStreamClient::start(size_t index, const std::string& json_body, ApiKind api,
                             int64_t prompt_len, double clock_origin) {
  const double start = monotonic_seconds();
  auto c = std::make_unique<Connection>(api, start - clock_origin, prompt_len);
  c->index = index;
  c->clock_origin = clock_origin;
  c->events_counter = &events_received_;
  std::string head = fmt::format(
      "POST {} HTTP/1.1\r\nHost: {}:{}\r\nContent-Type: application/json\r\n"
      "Accept: text/event-stream\r\nConnection: close\r\nContent-Length: {}\r\n",
      endpoint_.path, endpoint_.host, endpoint_.port, json_body.size());
  for (const auto& h : extra_headers_) head += h + "\r\n";
  c->request = head + "\r\n" + json_body;

  const int fd = socket(address_->ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) {
    on_done_(index, c->recorder.fail(fmt::format("socket: {}", std::strerror(errno))));
    return;
  }
  const int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  c->fd = fd;
  if (connect(fd, reinterpret_cast<sockaddr*>(address_.get()), address_len_) != 0 &&
      errno != EINPROGRESS) {
    const std::string why = std::strerror(errno);
    close(fd);
    on_done_(index, c->recorder.fail(fmt::format("connect to {}:{}: {}", endpoint_.host,
                                                 endpoint_.port, why)));
    return;
  }
  epoll_event ev{};
  ev.events = EPOLLOUT | EPOLLIN;
  ev.data.fd = fd;
  if (epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, fd, &ev) != 0) fail("epoll_ctl: {}", std::strerror(errno));
  connections_.emplace(fd, std::move(c));
}

void HttpStreamClient::poll(double timeout_s) {
  constexpr int kMaxEvents = 256;
  epoll_event events[kMaxEvents];
  const int timeout_ms = timeout_s <= 0 ? 0 : int(timeout_s * 1000 + 0.999);
  const int n = epoll_wait(epoll_fd_, events, kMaxEvents, timeout_ms);
  if (n < 0 && errno != EINTR) fail("epoll_wait: {}", std::strerror(errno));
  for (int i = 0; i < n; ++i) {
    auto it = connections_.find(events[i].data.fd);
    if (it != connections_.end()) handle(*it->second, events[i].events);
  }
}

void HttpStreamClient::handle(Connection& c, uint32_t events) {
  const int fd = c.fd;
  try {
    if (events & EPOLLOUT) on_writable(c);
    if (connections_.count(fd) && (events & (EPOLLIN | EPOLLHUP | EPOLLERR))) on_readable(c);
  } catch (const std::exception& e) {
    if (connections_.count(fd)) complete(fd, c.recorder.fail(e.what()));
  }
}

void HttpStreamClient::on_writable(Connection& c) {
  if (!c.connected) {
    int err = 0;
    socklen_t len = sizeof err;
    getsockopt(c.fd, SOL_SOCKET, SO_ERROR, &err, &len);
    if (err != 0)
      fail("connect to {}:{}: {}", endpoint_.host, endpoint_.port, std::strerror(err));
    c.connected = true;
  }
  while (c.written < c.request.size()) {
    const ssize_t n = send(c.fd, c.request.data() + c.written, c.request.size() - c.written,
                           MSG_NOSIGNAL);
    if (n < 0) {
      if (errno == EAGAIN || errno == EWOULDBLOCK) return;
      fail("sending the request: {}", std::strerror(errno));
    }
    c.written += size_t(n);
  }
  epoll_event ev{};
  ev.events = EPOLLIN;
  ev.data.fd = c.fd;
  epoll_ctl(epoll_fd_, EPOLL_CTL_MOD, c.fd, &ev);
}

void HttpStreamClient::on_readable(Connection& c) {
  char buffer[64 * 1024];
  while (true) {
    const ssize_t n = recv(c.fd, buffer, sizeof buffer, 0);
    if (n > 0) {
      c.read_time = monotonic_seconds();
      c.http.feed(std::string_view(buffer, size_t(n)));
      if (c.http.complete()) break;
      continue;
    }
    if (n == 0) {
      c.http.on_eof();
      if (!c.http.complete()) fail("the server closed the connection before the response ended");
      break;
    }
    if (errno == EAGAIN || errno == EWOULDBLOCK) return;
    if (errno == EINTR) continue;
    fail("reading the response: {}", std::strerror(errno));
  }
  // The response is complete.
  if (c.http.status() != 200) {
    fail("HTTP {} {}: {}", c.http.status(), c.http.reason(), c.error_body);
  }
  c.sse.finish();
  complete(c.fd, c.recorder.finish());
}

void HttpStreamClient::complete(int fd, RequestOutcome outcome) {
  auto it = connections_.find(fd);
  const size_t index = it->second->index;
  epoll_ctl(epoll_fd_, EPOLL_CTL_DEL, fd, nullptr);
  close(fd);
  connections_.erase(it);
  on_done_(index, std::move(outcome));
}

}  // namespace mx::bench
