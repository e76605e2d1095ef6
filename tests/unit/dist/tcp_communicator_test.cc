// The tcp communicator (ranks in different processes, here threads joined by
// loopback TCP): its collectives give bitwise the results of the in-process
// LocalGroup, on every rank; a peer that disconnects or aborts makes the
// others throw instead of hang.
#include "dist/tcp_communicator.h"

#include <gtest/gtest.h>

#include <chrono>
#include <functional>
#include <future>
#include <random>
#include <thread>

#include "dist/local_group.h"

namespace mx {
namespace {

// world ranks whose links to rank 0 are real TCP connections over loopback.
std::vector<std::unique_ptr<Communicator>> loopback_group(int world) {
  TcpListener listener(0);
  std::vector<std::unique_ptr<TcpChannel>> at_root(static_cast<size_t>(world));
  std::vector<std::unique_ptr<Communicator>> comms(static_cast<size_t>(world));
  for (int r = 1; r < world; ++r) {
    std::vector<std::unique_ptr<TcpChannel>> one;
    one.push_back(connect_tcp("127.0.0.1", listener.port(), 5, "rank 0"));
    at_root[size_t(r)] = listener.accept(5);  // connections are accepted in the order they were made
    at_root[size_t(r)]->set_peer(fmt::format("rank {}", r));
    comms[size_t(r)] = make_tcp_communicator(r, world, std::move(one));
  }
  comms[0] = make_tcp_communicator(0, world, std::move(at_root));
  return comms;
}

// Runs fn(rank, comm) on one thread per rank; fails (instead of hanging) when
// a rank is still running after 20 s, aborting the group to free it.
template <typename Fn>
void spmd(std::vector<std::unique_ptr<Communicator>>& comms, Fn fn) {
  std::vector<std::future<void>> ranks;
  for (size_t r = 0; r < comms.size(); ++r)
    ranks.push_back(std::async(std::launch::async, [&, r] { fn(int(r), *comms[r]); }));
  for (auto& f : ranks)
    if (f.wait_for(std::chrono::seconds(20)) != std::future_status::ready) {
      ADD_FAILURE() << "a rank hung";
      for (auto& c : comms) c->abort("test timeout");
    }
  for (auto& f : ranks) f.get();
}

// Values whose float sums depend on the order of the additions.
std::vector<float> values(int rank, int n) {
  std::mt19937 rng(uint32_t(rank * 7919 + n));
  std::uniform_real_distribution<float> mag(-8, 8), u(-1, 1);
  std::vector<float> v(static_cast<size_t>(n));
  for (auto& x : v) x = u(rng) * std::exp2(std::round(mag(rng)));
  return v;
}

struct Results {
  std::vector<std::vector<float>> reduced, gathered, scattered;
};

Results run_collectives(std::vector<std::unique_ptr<Communicator>>& comms) {
  const int world = int(comms.size());
  Results out;
  out.reduced.resize(size_t(world));
  out.gathered.resize(size_t(world));
  out.scattered.resize(size_t(world));
  spmd(comms, [&](int r, Communicator& c) {
    EXPECT_EQ(c.rank(), r);
    EXPECT_EQ(c.world_size(), world);
    for (int round = 0; round < 5; ++round) {  // back-to-back collectives
      Tensor x = Tensor::from_f32(values(r + round, 2 * 999), {2, 999});
      c.all_reduce_sum(x);
      if (round == 4) out.reduced[size_t(r)] = x.to_f32_vector();
    }
    out.gathered[size_t(r)] = c.all_gather(Tensor::from_f32(values(r, 6), {3, 2})).to_f32_vector();
    out.scattered[size_t(r)] = c.reduce_scatter(Tensor::from_f32(values(r, 4 * world), {world, 4})).to_f32_vector();
  });
  return out;
}

TEST(TcpCommunicator, CollectivesEqualLocalGroupBitwiseOnEveryRank) {
  for (int world : {2, 3}) {
    auto local = LocalGroup::make(world);
    auto tcp = loopback_group(world);
    const Results want = run_collectives(local), got = run_collectives(tcp);
    for (int r = 0; r < world; ++r) {
      EXPECT_EQ(got.reduced[size_t(r)], want.reduced[size_t(r)]) << "rank " << r;  // float ==: bitwise for finite values
      EXPECT_EQ(got.reduced[size_t(r)], got.reduced[0]);
      EXPECT_EQ(got.gathered[size_t(r)], want.gathered[size_t(r)]);
      EXPECT_EQ(got.scattered[size_t(r)], want.scattered[size_t(r)]);
    }
  }
}

TEST(TcpCommunicator, InProcessGroupMatchesToo) {
  auto local = LocalGroup::make(3);
  auto pairs = make_tcp_group_in_process(3);
  const Results want = run_collectives(local), got = run_collectives(pairs);
  EXPECT_EQ(got.reduced, want.reduced);
  EXPECT_EQ(got.gathered, want.gathered);
  EXPECT_EQ(got.scattered, want.scattered);
}

TEST(TcpCommunicator, AllGatherKeepsOtherDtypes) {
  auto comms = loopback_group(2);
  spmd(comms, [&](int r, Communicator& c) {
    Tensor x = Tensor::empty(DType::I32, {1, 2});
    x.data<int32_t>()[0] = 10 * r;
    x.data<int32_t>()[1] = 10 * r + 1;
    Tensor g = c.all_gather(x);
    ASSERT_EQ(g.dtype(), DType::I32);
    EXPECT_EQ(std::vector<int32_t>(g.data<int32_t>(), g.data<int32_t>() + 4), (std::vector<int32_t>{0, 1, 10, 11}));
  });
}

TEST(TcpCommunicator, MismatchedShapesAreAnErrorOnEveryRank) {
  auto comms = loopback_group(3);
  std::vector<std::string> errors(3);
  spmd(comms, [&](int r, Communicator& c) {
    Tensor x = Tensor::zeros(DType::F32, {1, r == 2 ? 3 : 2});
    try {
      c.all_reduce_sum(x);
    } catch (const Error& e) {
      errors[size_t(r)] = e.what();
    }
    Tensor y = Tensor::from_f32({1, 2}, {1, 2});  // the group still works afterwards
    c.all_reduce_sum(y);
    EXPECT_EQ(y.to_f32_vector(), (std::vector<float>{3, 6}));
  });
  for (const auto& e : errors) EXPECT_NE(e.find("rank 2 passed f32[1, 3]"), std::string::npos) << e;
}

// Runs fn on a detached thread: false when it is still running after
// `seconds`. fn must own what it uses (shared_ptr): a hung fn is left behind,
// so a broken communicator fails the test instead of hanging the binary.
bool finishes_within(double seconds, std::function<void()> fn) {
  auto done = std::make_shared<std::promise<void>>();
  auto finished = done->get_future();
  std::thread([fn = std::move(fn), done] {
    fn();
    done->set_value();
  }).detach();
  return finished.wait_for(std::chrono::duration<double>(seconds)) == std::future_status::ready;
}

struct Shared {
  std::vector<std::unique_ptr<Communicator>> comms;
  std::vector<std::string> errors = std::vector<std::string>(3);
};

TEST(TcpCommunicator, APeerThatDisconnectsMakesTheOthersThrow) {
  auto g = std::make_shared<Shared>();
  g->comms = loopback_group(3);
  g->comms[2].reset();  // rank 2's process died: its socket closes
  auto rank = [g](int r) {
    return [g, r] {
      Tensor x = Tensor::from_f32({1, 2}, {1, 2});
      try {
        g->comms[size_t(r)]->all_reduce_sum(x);
      } catch (const ChannelClosed& e) {
        g->errors[size_t(r)] = e.what();
        g->comms[size_t(r)]->abort(e.what());  // as RankWorkers' failure hook does
      }
    };
  };
  std::thread rank1(rank(1));
  rank1.detach();
  ASSERT_TRUE(finishes_within(10, rank(0))) << "rank 0 hung";
  ASSERT_TRUE(finishes_within(10, [g] {
    while (g->errors[1].empty()) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  })) << "rank 1 hung after rank 0 gave up";
  EXPECT_NE(g->errors[0].find("rank 2"), std::string::npos) << g->errors[0];
}

TEST(TcpCommunicator, AbortWakesARankBlockedInACollective) {
  auto g = std::make_shared<Shared>();
  g->comms = loopback_group(2);
  std::thread blocked([g] {
    Tensor x = Tensor::from_f32({1}, {1, 1});
    try {
      g->comms[1]->all_reduce_sum(x);  // rank 0 never comes
      g->errors[1] = "returned";
    } catch (const ChannelClosed& e) {
      g->errors[1] = e.what();
    }
  });
  blocked.detach();
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  g->comms[1]->abort("rank 1's device failed");
  ASSERT_TRUE(finishes_within(5, [g] {
    while (g->errors[1].empty()) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  })) << "abort did not wake the rank";
  EXPECT_EQ(g->errors[1], "parallel group stopped: rank 1's device failed");
  Tensor y = Tensor::from_f32({1}, {1, 1});
  EXPECT_THROW(g->comms[0]->all_reduce_sum(y), ChannelClosed);  // rank 0 sees rank 1 gone
}

}  // namespace
}  // namespace mx
