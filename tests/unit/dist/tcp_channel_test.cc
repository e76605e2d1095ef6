// Framed socket messages: frames arrive whole and in order over loopback TCP,
// and a peer that closes, a shutdown from another thread, or nobody listening
// makes the caller throw instead of waiting forever.
#include "dist/tcp_channel.h"

#include <gtest/gtest.h>

#include <chrono>
#include <future>
#include <thread>

namespace mx {
namespace {

std::pair<std::unique_ptr<TcpChannel>, std::unique_ptr<TcpChannel>> loopback_pair() {
  TcpListener listener(0);
  auto client = std::async(std::launch::async, [&] { return connect_tcp("127.0.0.1", listener.port(), 5, "server"); });
  auto server = listener.accept(5);
  EXPECT_NE(server, nullptr);
  return {std::move(server), client.get()};
}

TEST(TcpChannel, FramesArriveWholeAndInOrder) {
  auto [a, b] = loopback_pair();
  std::string big(3 << 20, '\0');
  for (size_t i = 0; i < big.size(); ++i) big[i] = char(i * 131 % 251);
  std::thread sender([&, &a = a] {
    a->send(7, "hello");
    a->send(8, "");
    a->send(9, "head:", big.data(), big.size());
  });
  Frame f1 = b->receive(), f2 = b->receive(), f3 = b->receive();
  sender.join();
  EXPECT_EQ(f1.tag, 7u);
  EXPECT_EQ(f1.payload, "hello");
  EXPECT_EQ(f2.tag, 8u);
  EXPECT_EQ(f2.payload, "");
  EXPECT_EQ(f3.tag, 9u);
  EXPECT_EQ(f3.payload, "head:" + big);
}

TEST(TcpChannel, ReceiveExpectRethrowsThePeersError) {
  auto [a, b] = loopback_pair();
  a->send(TcpChannel::kErrorTag, "rank 1: out of memory");
  try {
    b->receive_expect(5, "a result");
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(), "rank 1: out of memory");
  }
  a->send(6, "x");
  EXPECT_THROW(b->receive_expect(5, "a result"), Error);
}

TEST(TcpChannel, PeerThatClosesMakesReceiveAndSendThrow) {
  auto [a, b] = loopback_pair();
  b->set_peer("node 1");
  a.reset();
  try {
    b->receive();
    FAIL() << "no error";
  } catch (const ChannelClosed& e) {
    EXPECT_NE(std::string(e.what()).find("node 1"), std::string::npos) << e.what();
  }
  // Writing to a closed peer fails (EPIPE / reset) without killing the process by SIGPIPE.
  EXPECT_THROW(
      for (int i = 0; i < 100; ++i) b->send(1, std::string(1 << 16, 'x')), ChannelClosed);
}

TEST(TcpChannel, ShutdownWakesAReceiveBlockedInAnotherThread) {
  auto [a, b] = loopback_pair();
  auto blocked = std::async(std::launch::async, [&b = b] {
    try {
      b->receive();
    } catch (const ChannelClosed&) {
      return true;
    }
    return false;
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  b->shutdown();
  ASSERT_EQ(blocked.wait_for(std::chrono::seconds(5)), std::future_status::ready) << "receive still blocked";
  EXPECT_TRUE(blocked.get());
}

TEST(TcpChannel, ReceiveTimeoutThrows) {
  auto [a, b] = loopback_pair();
  b->set_receive_timeout(0.2);
  const auto t0 = std::chrono::steady_clock::now();
  EXPECT_THROW(b->receive(), ChannelClosed);
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(3));
}

TEST(TcpChannel, ConnectGivesUpWithTheAddressWhenNobodyListens) {
  int port = 0;
  {
    TcpListener probe(0);
    port = probe.port();
  }
  const auto t0 = std::chrono::steady_clock::now();
  try {
    connect_tcp("127.0.0.1", port, 0.5, "node 0");
    FAIL() << "connected to nothing";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(fmt::format("node 0 at 127.0.0.1:{}", port)), std::string::npos) << e.what();
  }
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(5));
}

TEST(TcpChannel, AcceptTimesOutWithNull) {
  TcpListener listener(0);
  EXPECT_EQ(listener.accept(0.1), nullptr);
}

}  // namespace
}  // namespace mx
