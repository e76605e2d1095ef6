// The in-process communicator: collectives give the right sums/layouts on
// every rank, bitwise the same everywhere, and a failing rank's abort wakes a
// peer blocked in a collective instead of leaving it hanging.
#include "dist/local_group.h"

#include <gtest/gtest.h>

#include <thread>

#include "core/error.h"
#include "dist/rank_workers.h"

namespace mx {
namespace {

// Runs fn(rank, comm) on one thread per rank.
template <typename Fn>
void spmd(int world, Fn fn) {
  auto comms = LocalGroup::make(world);
  std::vector<std::thread> threads;
  for (int r = 0; r < world; ++r) threads.emplace_back([&, r] { fn(r, *comms[size_t(r)]); });
  for (auto& t : threads) t.join();
}

TEST(LocalGroup, AllReduceSumsOnEveryRank) {
  const int world = 3;
  std::vector<std::vector<float>> results(world);
  spmd(world, [&](int r, Communicator& c) {
    EXPECT_EQ(c.rank(), r);
    EXPECT_EQ(c.world_size(), world);
    for (int round = 0; round < 20; ++round) {  // back-to-back collectives reuse the slots
      Tensor x = Tensor::from_f32({float(r), 0.1f * float(r + round), 1e-3f}, {1, 3});
      c.all_reduce_sum(x);
      EXPECT_FLOAT_EQ(x.get_f32(0), 3.0f);
      EXPECT_FLOAT_EQ(x.get_f32(1), 0.1f * float(3 * round + 3));
      if (round == 19) results[size_t(r)] = x.to_f32_vector();
    }
  });
  EXPECT_EQ(results[0], results[1]);
  EXPECT_EQ(results[0], results[2]);
}

TEST(LocalGroup, AllGatherAndReduceScatter) {
  spmd(2, [&](int r, Communicator& c) {
    Tensor x = Tensor::from_f32({float(10 * r), float(10 * r + 1)}, {1, 2});
    Tensor g = c.all_gather(x);
    EXPECT_EQ(g.shape(), (Shape{2, 2}));
    EXPECT_EQ(g.to_f32_vector(), (std::vector<float>{0, 1, 10, 11}));
    Tensor y = Tensor::from_f32({1, 2, 3, float(r)}, {2, 2});  // summed: {2, 4, 6, 1}
    Tensor s = c.reduce_scatter(y);
    EXPECT_EQ(s.shape(), (Shape{1, 2}));
    EXPECT_EQ(s.to_f32_vector(), r == 0 ? (std::vector<float>{2, 4}) : (std::vector<float>{6, 1}));
  });
}

TEST(LocalGroup, MismatchedShapesAreAnErrorOnEveryRank) {
  std::vector<int> threw(2, 0);
  spmd(2, [&](int r, Communicator& c) {
    Tensor x = Tensor::zeros(DType::F32, {1, r + 1});
    try {
      c.all_reduce_sum(x);
    } catch (const Error& e) {
      threw[size_t(r)] = std::string(e.what()).find("rank 1 passed") != std::string::npos;
    }
  });
  EXPECT_EQ(threw, (std::vector<int>{1, 1}));
}

TEST(LocalGroup, AbortWakesABlockedRank) {
  std::string seen;
  spmd(2, [&](int r, Communicator& c) {
    if (r == 1) {
      std::this_thread::sleep_for(std::chrono::milliseconds(50));  // rank 0 is waiting by now
      c.abort("rank 1 ran out of memory");
      return;
    }
    Tensor x = Tensor::zeros(DType::F32, {4});
    try {
      c.all_reduce_sum(x);
    } catch (const Error& e) {
      seen = e.what();
    }
  });
  EXPECT_NE(seen.find("rank 1 ran out of memory"), std::string::npos) << seen;
}

TEST(RankWorkers, AFailingRankStopsTheGroupWithItsError) {
  auto comms = LocalGroup::make(2);
  RankWorkers workers(2, [&](const std::string& why) {
    for (auto& c : comms) c->abort(why);
  });
  // Rank 1 fails before the collective its peer is waiting in.
  auto step = [&](int r) {
    if (r == 1) fail("CUDA error: out of memory");
    Tensor x = Tensor::zeros(DType::F32, {4});
    comms[0]->all_reduce_sum(x);
  };
  try {
    workers.run(step);
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()), "rank 1: CUDA error: out of memory");
  }
  EXPECT_TRUE(workers.failed());
  // Later steps fail at once with the same cause.
  try {
    workers.run([](int) {});
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("CUDA error: out of memory"), std::string::npos) << e.what();
  }
}

TEST(RankWorkers, RunsEveryRankOnItsOwnThread) {
  RankWorkers workers(3, nullptr);
  std::vector<std::thread::id> ids(3);
  for (int round = 0; round < 2; ++round) {
    std::vector<std::thread::id> now(3);
    workers.run([&](int r) { now[size_t(r)] = std::this_thread::get_id(); });
    if (round == 0) ids = now;
    EXPECT_EQ(now, ids);  // the same thread per rank every time
  }
  EXPECT_NE(ids[0], ids[1]);
  EXPECT_NE(ids[1], ids[2]);
  EXPECT_NE(ids[0], std::this_thread::get_id());
}

TEST(RankWorkers, InvalidArgumentStaysOne) {
  RankWorkers workers(2, nullptr);
  EXPECT_THROW(workers.run([](int r) {
    if (r == 0) fail_input("40 heads do not split over 3 ranks");
  }),
               InvalidArgument);
}

}  // namespace
}  // namespace mx
