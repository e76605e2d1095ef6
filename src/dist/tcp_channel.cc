#include "dist/tcp_channel.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cmath>
#include <chrono>
#include <cstring>
#include <thread>

namespace mx {

namespace {

// Frames past this are a corrupt stream or another program on the port.
constexpr uint64_t kMaxPayload = uint64_t(1) << 36;

std::string os_error(int err) { return std::strerror(err); }

// Small frames go out at once; a silent dead peer is found by keep-alive
// probes. Both fail harmlessly on a socket pair.
void tune_socket(int fd) {
  int one = 1, idle = 10, interval = 5, count = 3;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
  setsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &one, sizeof(one));
  setsockopt(fd, IPPROTO_TCP, TCP_KEEPIDLE, &idle, sizeof(idle));
  setsockopt(fd, IPPROTO_TCP, TCP_KEEPINTVL, &interval, sizeof(interval));
  setsockopt(fd, IPPROTO_TCP, TCP_KEEPCNT, &count, sizeof(count));
}

}  // namespace

TcpChannel::TcpChannel(int fd, std::string peer) : fd_(fd), peer_(std::move(peer)) { tune_socket(fd_); }

TcpChannel::~TcpChannel() {
  if (fd_ >= 0) ::close(fd_);
}

void TcpChannel::write_all(const void* data, size_t n) {
  const char* p = static_cast<const char*>(data);
  while (n > 0) {
    // MSG_NOSIGNAL: a peer that went away is an error here, not SIGPIPE.
    const ssize_t w = ::send(fd_, p, n, MSG_NOSIGNAL);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) throw ChannelClosed(fmt::format("lost the connection to {} (send: {})", peer_, os_error(errno)));
    p += w;
    n -= size_t(w);
  }
}

void TcpChannel::read_all(void* data, size_t n) {
  char* p = static_cast<char*>(data);
  while (n > 0) {
    const ssize_t r = ::recv(fd_, p, n, 0);
    if (r < 0 && errno == EINTR) continue;
    if (r == 0) throw ChannelClosed(fmt::format("lost the connection to {} (closed)", peer_));
    if (r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
      throw ChannelClosed(fmt::format("no answer from {} in time", peer_));
    if (r < 0) throw ChannelClosed(fmt::format("lost the connection to {} ({})", peer_, os_error(errno)));
    p += r;
    n -= size_t(r);
  }
}

void TcpChannel::send(uint32_t tag, std::string_view head, const void* body, size_t n) {
  char header[12];
  const uint64_t length = head.size() + n;
  std::memcpy(header, &tag, 4);
  std::memcpy(header + 4, &length, 8);
  write_all(header, sizeof(header));
  write_all(head.data(), head.size());
  if (n) write_all(body, n);
}

Frame TcpChannel::receive() {
  char header[12];
  read_all(header, sizeof(header));
  Frame f;
  uint64_t length = 0;
  std::memcpy(&f.tag, header, 4);
  std::memcpy(&length, header + 4, 8);
  if (length > kMaxPayload) throw ChannelClosed(fmt::format("{} sent a frame of {} bytes: not an mxserve peer?", peer_, length));
  f.payload.resize(size_t(length));
  read_all(f.payload.data(), f.payload.size());
  return f;
}

std::string TcpChannel::receive_expect(uint32_t expected, const char* what) {
  Frame f = receive();
  if (f.tag == kErrorTag) throw Error(f.payload);
  if (f.tag != expected) fail("{}: expected {} (tag {:#x}), got tag {:#x}", peer_, what, expected, f.tag);
  return std::move(f.payload);
}

std::string TcpChannel::remote_address() const {
  sockaddr_storage addr{};
  socklen_t len = sizeof(addr);
  char host[NI_MAXHOST] = "?";
  if (getpeername(fd_, reinterpret_cast<sockaddr*>(&addr), &len) != 0 || addr.ss_family == AF_UNIX) return "local";
  getnameinfo(reinterpret_cast<sockaddr*>(&addr), len, host, sizeof(host), nullptr, 0, NI_NUMERICHOST);
  return host;
}

void TcpChannel::shutdown() { ::shutdown(fd_, SHUT_RDWR); }

void TcpChannel::set_receive_timeout(double seconds) {
  timeval tv{};
  tv.tv_sec = time_t(seconds);
  tv.tv_usec = suseconds_t((seconds - double(tv.tv_sec)) * 1e6);
  setsockopt(fd_, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
}

std::unique_ptr<TcpChannel> connect_tcp(const std::string& host, int port, double timeout_s, const std::string& peer) {
  using Clock = std::chrono::steady_clock;
  const auto deadline = Clock::now() + std::chrono::duration<double>(timeout_s);
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  std::string last_error;
  for (;;) {
    addrinfo* found = nullptr;
    const int rc = getaddrinfo(host.c_str(), std::to_string(port).c_str(), &hints, &found);
    if (rc != 0) fail_input("cannot resolve {} ({}): {}", host, peer, gai_strerror(rc));
    for (addrinfo* a = found; a; a = a->ai_next) {
      const int fd = ::socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, a->ai_protocol);
      if (fd < 0) continue;
      if (::connect(fd, a->ai_addr, a->ai_addrlen) == 0) {
        freeaddrinfo(found);
        return std::make_unique<TcpChannel>(fd, peer);
      }
      last_error = os_error(errno);
      ::close(fd);
    }
    freeaddrinfo(found);
    if (Clock::now() >= deadline)
      fail("could not connect to {} at {}:{} within {} s ({})", peer, host, port, timeout_s, last_error);
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
}

TcpListener::TcpListener(int port) {
  fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd_ < 0) fail("socket: {}", os_error(errno));
  int one = 1;
  setsockopt(fd_, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_ANY);
  addr.sin_port = htons(uint16_t(port));
  if (::bind(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0 || ::listen(fd_, 128) != 0) {
    const int err = errno;
    ::close(fd_);
    fd_ = -1;
    fail_input("cannot listen on port {} for the other nodes: {}", port, os_error(err));
  }
  socklen_t len = sizeof(addr);
  getsockname(fd_, reinterpret_cast<sockaddr*>(&addr), &len);
  port_ = ntohs(addr.sin_port);
}

TcpListener::~TcpListener() {
  if (fd_ >= 0) ::close(fd_);
}

std::unique_ptr<TcpChannel> TcpListener::accept(double timeout_s) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_s);
  for (;;) {
    const double left = std::chrono::duration<double>(deadline - std::chrono::steady_clock::now()).count();
    if (left <= 0) return nullptr;
    pollfd p{fd_, POLLIN, 0};
    const int ready = ::poll(&p, 1, int(std::ceil(left * 1000)));
    if (ready < 0 && errno != EINTR) fail("poll on the bootstrap port: {}", os_error(errno));
    if (ready <= 0) continue;  // a signal, or the time is up (checked above)
    sockaddr_storage addr{};
    socklen_t len = sizeof(addr);
    const int fd = ::accept4(fd_, reinterpret_cast<sockaddr*>(&addr), &len, SOCK_CLOEXEC);
    if (fd < 0) continue;  // the peer left before we took it: keep waiting
    auto channel = std::make_unique<TcpChannel>(fd, "");
    channel->set_peer("a peer at " + channel->remote_address());
    return channel;
  }
}

std::pair<std::unique_ptr<TcpChannel>, std::unique_ptr<TcpChannel>> channel_pair(const std::string& peer_a,
                                                                                 const std::string& peer_b) {
  int fds[2];
  if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds) != 0) fail("socketpair: {}", os_error(errno));
  // Each end is named after the peer it talks to.
  return {std::make_unique<TcpChannel>(fds[0], peer_b), std::make_unique<TcpChannel>(fds[1], peer_a)};
}

}  // namespace mx
