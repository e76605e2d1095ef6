// Framed messages over a stream socket, the transport of multi-node serving
// (docs/parallel.md): node bootstrap and commands (node_group.h) and the
// host-tensor collectives between processes (tcp_communicator.h). A frame is
// a tag (u32) and a payload length (u64), little-endian, then the payload.
// A closed, reset or shut-down socket makes send/receive throw ChannelClosed
// naming the peer, so a process that dies never leaves its peers waiting; TCP
// keep-alive probes (after 10 s idle, every 5 s, 3 misses) end a connection
// to a machine that vanished without a reset.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <utility>

#include "core/error.h"

namespace mx {

// The peer went away (EOF, reset), the socket was shut down here, or a
// receive timed out.
class ChannelClosed : public Error {
 public:
  using Error::Error;
};

struct Frame {
  uint32_t tag = 0;
  std::string payload;
};

class TcpChannel {
 public:
  // Takes ownership of a connected stream socket; `peer` names it in errors.
  TcpChannel(int fd, std::string peer);
  ~TcpChannel();
  TcpChannel(const TcpChannel&) = delete;
  TcpChannel& operator=(const TcpChannel&) = delete;

  // One frame; `body` (n bytes) follows `head` in the payload without a copy.
  void send(uint32_t tag, std::string_view head, const void* body = nullptr, size_t n = 0);
  Frame receive();
  // Receives a frame and checks its tag: `expected` or, for kErrorTag, the
  // peer's error text rethrown as mx::Error.
  std::string receive_expect(uint32_t expected, const char* what);
  // Wakes a receive blocked in another thread (it throws ChannelClosed) and
  // makes the peer see EOF. Safe to call from any thread, more than once.
  void shutdown();
  // 0: block forever (the default).
  void set_receive_timeout(double seconds);

  int fd() const { return fd_; }
  // The peer's numeric address ("10.0.0.2"; "local" for a socket pair).
  std::string remote_address() const;
  const std::string& peer() const { return peer_; }
  void set_peer(std::string peer) { peer_ = std::move(peer); }

  // A frame whose payload is an error message (any protocol may send it).
  static constexpr uint32_t kErrorTag = 0xE7707u;

 private:
  void write_all(const void* data, size_t n);
  void read_all(void* data, size_t n);

  int fd_;
  std::string peer_;
};

// Connects to host:port, retrying while nothing listens there yet, until
// timeout_s; throws mx::Error saying where and why it failed.
std::unique_ptr<TcpChannel> connect_tcp(const std::string& host, int port, double timeout_s, const std::string& peer);

// Listens on every interface at `port` (0: any free port).
class TcpListener {
 public:
  explicit TcpListener(int port);
  ~TcpListener();
  TcpListener(const TcpListener&) = delete;
  TcpListener& operator=(const TcpListener&) = delete;
  int port() const { return port_; }
  // The next connection, or nullptr once timeout_s passed without one.
  std::unique_ptr<TcpChannel> accept(double timeout_s);

 private:
  int fd_ = -1;
  int port_ = 0;
};

// Two connected channels in this process (ranks of one node talking to rank 0).
std::pair<std::unique_ptr<TcpChannel>, std::unique_ptr<TcpChannel>> channel_pair(const std::string& peer_a,
                                                                                 const std::string& peer_b);

}  // namespace mx
