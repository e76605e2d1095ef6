// The node group (nodes as threads here, talking over loopback TCP exactly as
// processes do): nodes join node 0 and get its group id, a node serving
// something else is refused with the reason on both sides, commands reach
// every node and their outcomes come back, and a node that goes away or fails
// mid-step stops node 0's step at once, naming that node.
#include "dist/node_group.h"

#include <gtest/gtest.h>

#include <chrono>
#include <future>
#include <thread>

namespace mx {
namespace {

int free_port() {
  TcpListener probe(0);
  return probe.port();
}

NodeGroupOptions options(int node, int nnodes, int port) {
  NodeGroupOptions o;
  o.nnodes = nnodes;
  o.node_rank = node;
  o.master_port = port;
  o.world_size = 2 * nnodes;
  o.timeout_s = 10;
  o.must_match = {{"config.json hash", "abc"}, {"--load-format", "auto"}};
  o.make_group_id = [] { return std::string("id-from-node-0"); };
  return o;
}

// Nodes 1..n-1 joined on threads; node 0 joined here.
struct Joined {
  std::unique_ptr<NodeGroup> leader;
  std::vector<std::unique_ptr<NodeGroup>> others;
};
Joined join_all(int nnodes, bool host = false) {
  const int port = free_port();
  std::vector<std::future<std::unique_ptr<NodeGroup>>> pending;
  for (int n = 1; n < nnodes; ++n)
    pending.push_back(std::async(std::launch::async, [=] {
      auto o = options(n, nnodes, port);
      o.host_collectives = host;
      return NodeGroup::join(o);
    }));
  auto o = options(0, nnodes, port);
  o.host_collectives = host;
  Joined j{NodeGroup::join(o), {}};
  for (auto& p : pending) j.others.push_back(p.get());
  return j;
}

TEST(NodeGroup, NodesJoinAndGetTheGroupId) {
  Joined j = join_all(3);
  EXPECT_EQ(j.leader->group_id(), "id-from-node-0");
  for (int n = 1; n < 3; ++n) {
    const NodeGroup& g = *j.others[size_t(n - 1)];
    EXPECT_EQ(g.group_id(), "id-from-node-0");
    EXPECT_EQ(g.first_rank(), 2 * n);
    EXPECT_EQ(g.ranks_per_node(), 2);
  }
}

TEST(NodeGroup, CommandsReachEveryNodeAndOutcomesComeBack) {
  Joined j = join_all(3);
  std::vector<std::future<std::string>> followers;
  for (auto& g : j.others)
    followers.push_back(std::async(std::launch::async, [&g] {
      std::string seen;
      for (;;) {
        Frame f = g->next_command();
        if (f.tag == NodeGroup::kFirstCommandTag + 1) return seen;
        seen += f.payload;
        const NodeOutcome out = g->run_watched(
            [&] {
              return g->node_rank() == 2 && f.payload == "b" ? NodeOutcome{false, true, false, false, "rank 4: boom"}
                                                              : NodeOutcome{};
            },
            [](const std::string&) {});
        g->send_outcome(out);
      }
    }));
  auto step = [&](const std::string& payload) {
    return j.leader->run_everywhere(NodeGroup::kFirstCommandTag, payload, [] { return NodeOutcome{}; },
                                    [](const std::string&) {});
  };
  auto first = step("a");
  ASSERT_EQ(first.size(), 3u);
  for (const auto& o : first) EXPECT_TRUE(o.ok) << o.message;
  auto second = step("b");
  EXPECT_TRUE(second[1].ok);
  EXPECT_FALSE(second[2].ok);
  EXPECT_EQ(second[2].message, "rank 4: boom");
  EXPECT_TRUE(second[2].primary);
  j.leader->send_to_all(NodeGroup::kFirstCommandTag + 1, "");
  for (auto& f : followers) EXPECT_EQ(f.get(), "ab");
}

TEST(NodeGroup, ANodeServingAnotherModelIsRefusedOnBothSides) {
  const int port = free_port();
  auto follower = std::async(std::launch::async, [=] {
    auto o = options(1, 2, port);
    o.must_match[0].second = "def";
    try {
      NodeGroup::join(o);
    } catch (const InvalidArgument& e) {
      return std::string(e.what());
    }
    return std::string("joined");
  });
  try {
    NodeGroup::join(options(0, 2, port));
    FAIL() << "node 0 accepted a mismatched node";
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("its config.json hash is def, node 0's is abc"), std::string::npos) << e.what();
  }
  const std::string refused = follower.get();
  EXPECT_NE(refused.find("node 0 refused this node"), std::string::npos) << refused;
  EXPECT_NE(refused.find("config.json hash is def"), std::string::npos) << refused;
}

TEST(NodeGroup, AWrongWorldSizeIsRefused) {
  const int port = free_port();
  auto follower = std::async(std::launch::async, [=] {
    auto o = options(1, 2, port);
    o.world_size = 6;
    EXPECT_THROW(NodeGroup::join(o), InvalidArgument);
  });
  try {
    NodeGroup::join(options(0, 2, port));
    FAIL() << "accepted";
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("6 ranks in all; node 0 has --nnodes 2 and 4 ranks"), std::string::npos)
        << e.what();
  }
  follower.get();
}

TEST(NodeGroup, NodeZeroGivesUpWhenANodeNeverComes) {
  auto o = options(0, 2, free_port());
  o.timeout_s = 0.3;
  try {
    NodeGroup::join(o);
    FAIL() << "formed without node 1";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("nodes not joined: 1"), std::string::npos) << e.what();
  }
}

TEST(NodeGroup, ANodeThatGoesAwayMidStepStopsNodeZerosRanksNamingIt) {
  Joined j = join_all(2);
  std::promise<void> peer_failed;
  std::string why;
  auto outcomes = j.leader->run_everywhere(
      NodeGroup::kFirstCommandTag, "",
      [&] {
        j.others[0].reset();  // node 1 dies while node 0's ranks work
        // Node 0's ranks would now wait in a collective: the watch must wake them.
        const bool woken = peer_failed.get_future().wait_for(std::chrono::seconds(10)) == std::future_status::ready;
        return woken ? NodeOutcome{false, false, false, false, "rank 0: interrupted"} : NodeOutcome{};
      },
      [&](const std::string& w) {
        why = w;
        peer_failed.set_value();
      });
  EXPECT_NE(why.find("node 1 is gone"), std::string::npos) << why;
  ASSERT_EQ(outcomes.size(), 2u);
  EXPECT_FALSE(outcomes[0].ok) << "node 0's ranks were not stopped";
  EXPECT_TRUE(outcomes[1].lost);
  EXPECT_NE(outcomes[1].message.find("node 1 is gone"), std::string::npos) << outcomes[1].message;
  // The next step knows at once.
  bool told = false;
  auto again = j.leader->run_everywhere(NodeGroup::kFirstCommandTag, "", [] { return NodeOutcome{}; },
                                        [&](const std::string&) { told = true; });
  EXPECT_TRUE(told);
  EXPECT_TRUE(again[1].lost);
}

TEST(NodeGroup, AFollowerSeesNodeZeroGoAway) {
  Joined j = join_all(2);
  j.leader.reset();
  EXPECT_THROW(j.others[0]->next_command(), ChannelClosed);
}

TEST(NodeGroup, HostCommunicatorsSpanTheNodes) {
  Joined j = join_all(2, /*host=*/true);
  auto c0 = j.leader->take_host_communicators();
  auto c1 = j.others[0]->take_host_communicators();
  ASSERT_EQ(c0.size(), 2u);
  ASSERT_EQ(c1.size(), 2u);
  std::vector<Communicator*> all{c0[0].get(), c0[1].get(), c1[0].get(), c1[1].get()};
  std::vector<std::future<std::vector<float>>> ranks;
  for (int r = 0; r < 4; ++r)
    ranks.push_back(std::async(std::launch::async, [&, r] {
      EXPECT_EQ(all[size_t(r)]->rank(), r);
      Tensor x = Tensor::from_f32({float(r), 1}, {1, 2});
      all[size_t(r)]->all_reduce_sum(x);
      return x.to_f32_vector();
    }));
  for (auto& f : ranks) {
    ASSERT_EQ(f.wait_for(std::chrono::seconds(10)), std::future_status::ready);
    EXPECT_EQ(f.get(), (std::vector<float>{6, 4}));
  }
}

}  // namespace
}  // namespace mx
